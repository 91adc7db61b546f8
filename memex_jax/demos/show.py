"""Prints a demonstration of a dataset folder as Markdown, or the census of all of them.

  python -m memex_jax.demos.show WORKDIR/demos --index 3 > demonstration.md
  python -m memex_jax.demos.show WORKDIR/demos --census
"""

import sys

from memex_jax.agent import show
from memex_jax.demos import dataset

if __name__ == "__main__":
  sys.exit(show.main(read=dataset.demonstration_records,
                     path_help="a demonstrations folder (demos.dataset --out)"))
