"""Prints an episode of a trajectories file as Markdown, or the census of all of them.

  python -m memex_jax.agent.show WORKDIR/trajectories/valid_unseen_memex.jsonl --won
  python -m memex_jax.agent.show FILE --index 3 > episode.md
  python -m memex_jax.agent.show FILE --census

A demonstrations folder is read by `python -m memex_jax.demos.show` (the same options).
"""

import argparse
import sys
from typing import Any, Callable

from memex_jax.agent import census, records


def main(argv: list[str] | None = None,
         read: Callable[[str], list[dict[str, Any]]] = records.read_records,
         path_help: str = "a trajectories .jsonl file (one record per episode)") -> int:
  """The command line; `read` turns the path into episode records (`demos.show` reads a
  demonstrations folder with it)."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("path", help=path_help)
  which = parser.add_mutually_exclusive_group()
  which.add_argument("--index", type=int, default=0, help="the record's line, from 0")
  which.add_argument("--won", action="store_true", help="every episode that succeeded")
  which.add_argument("--census", action="store_true",
                     help="counts of every episode's calls, errors and observations")
  args = parser.parse_args(argv)
  found = read(args.path)
  if args.census:
    if not found:
      print(f"{args.path} has no records", file=sys.stderr)
      return 2
    print(census.render_census(census.take_census(found)), end="")
    return 0
  if args.won:
    chosen = [r for r in found if r["metrics"]["success"]]
  elif -len(found) <= args.index < len(found):
    chosen = [found[args.index]]
  else:
    print(f"{args.path} has {len(found)} records; there is no index {args.index}", file=sys.stderr)
    return 2
  print("\n".join(records.render_record(r) for r in chosen), end="")
  if not chosen:
    print(f"no episode in {args.path} succeeded", file=sys.stderr)
  return 0


if __name__ == "__main__":
  sys.exit(main())
