"""One host of the two-process feedback test: joins a JAX runtime on loopback, gathers every
host's feedback, applies it to the shared starting graph, and saves the graph.

  python tests/harness/feedback_host.py <coordinator host:port> <process id> <out.npz>
"""

import os
import sys

os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

from memex_jax.harness import feedback as feedback_lib  # pylint: disable=wrong-import-position
from memex_jax.harness import persistence  # pylint: disable=wrong-import-position
from memex_jax.harness.experience import ExperienceGraph, ExperienceUnit  # pylint: disable=wrong-import-position
from memex_jax.harness.graph import GraphConfig  # pylint: disable=wrong-import-position

EMBED = 8
CONFIG = GraphConfig(capacity=12, embed_dim=EMBED, k_nn=2, grace_insertions=2)


def starting_graph() -> ExperienceGraph:
  """Six units with seeded embeddings: the same graph on every host."""
  graph = ExperienceGraph(CONFIG, "test-encoder")
  rng = np.random.default_rng(0)
  for i in range(6):
    graph.insert(ExperienceUnit(f"starting unit {i}", "skill", f"seed/{i}"),
                 rng.normal(size=EMBED).astype(np.float32))
  return graph


def local_feedback(process: int) -> list:
  """This host's share: different tasks, slots, rewards and new units on each host."""
  rng = np.random.default_rng(100 + process)
  out = []
  for j in range(5):  # 2 hosts x 5 new units fill the 12-slot graph and force evictions
    slots = rng.choice(6, size=2, replace=False).tolist()
    unit = ExperienceUnit(f"host {process} unit {j}", "lesson" if j % 2 else "skill",
                          f"task/{process}/{j}")
    out.append(feedback_lib.task_feedback(f"task/{process}/{j}", slots,
                                          float(rng.uniform(-1, 2)), unit,
                                          rng.normal(size=EMBED).astype(np.float32)))
  return out


def main() -> None:
  address, process, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
  jax.distributed.initialize(coordinator_address=address, num_processes=2, process_id=process)
  gathered = feedback_lib.gather_feedback(local_feedback(process))
  assert [f.task_id for f in gathered] == [f"task/{p}/{j}" for p in range(2) for j in range(5)]
  graph = starting_graph()
  stats = feedback_lib.apply_feedback(graph, gathered)
  assert stats.tasks == 10 and stats.evictions > 0, stats
  persistence.save(out, graph)
  jax.distributed.shutdown()


if __name__ == "__main__":
  main()
