"""Graph feedback: the Eq. 14 reward, utility EMA and counts on retrieved nodes, insertions, and
two JAX processes ending with identical graphs after gathering each other's feedback."""

import os
import pathlib
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from memex_jax.harness import feedback as feedback_lib
from memex_jax.harness.experience import ExperienceGraph, ExperienceUnit
from memex_jax.harness.graph import GraphConfig

HOST = pathlib.Path(__file__).with_name("feedback_host.py")
REPO = HOST.parents[2]


def test_reward_is_gain_plus_eta_times_score():
  assert feedback_lib.copilot_reward(1.0, 0.0) == 2.0  # a win that No-Memory lost: 1 + 1
  assert feedback_lib.copilot_reward(0.0, 1.0) == -1.0  # experience broke a win: -1 + 0
  assert feedback_lib.copilot_reward(1.0, 1.0) == 1.0
  assert feedback_lib.copilot_reward(0.5, 0.25, eta=2.0) == 1.25  # 0.25 + 2 * 0.5


def _graph(n=3, dim=4):
  graph = ExperienceGraph(GraphConfig(capacity=8, embed_dim=dim, k_nn=2, grace_insertions=1),
                          "test-encoder")
  for i in range(n):
    graph.insert(ExperienceUnit(f"unit {i}", "skill", f"s/{i}"), np.eye(dim)[i] + 0.1)
  return graph


def test_utilities_move_toward_each_reward_then_units_are_inserted():
  graph = _graph()
  unit = ExperienceUnit("a new lesson about counting", "lesson", "t/2")
  entries = [feedback_lib.task_feedback("t/0", [0, 1, -1], 2.0, None, None),
             feedback_lib.task_feedback("t/1", [1], -1.0, None, None),
             feedback_lib.task_feedback("t/2", [], 0.5, unit, np.array([0, 0, 0, 1.0]))]
  stats = feedback_lib.apply_feedback(graph, entries)
  utility, count = graph.state.nodes.utility, graph.state.nodes.count
  # beta = 0.1 from u = 0: node 0 -> 0.1 * 2 = 0.2; node 1 -> 0.2, then 0.9 * 0.2 - 0.1 = 0.08.
  np.testing.assert_allclose(utility[:3], [0.2, 0.08, 0.0], rtol=1e-6)
  assert count[:3].tolist() == [1, 2, 0]
  assert int(graph.state.num_retrievals) == 2  # the task that retrieved nothing is not one
  assert stats == feedback_lib.FeedbackStats(tasks=3, nodes_updated=3, insertions=1)
  assert len(graph) == 4 and graph.units[3] == unit
  # The same unit again is a near-duplicate: dropped and counted.
  again = feedback_lib.apply_feedback(graph, entries[2:])
  assert again.duplicates == 1 and again.insertions == 0 and len(graph) == 4


def test_feedback_round_trips_through_json_bit_for_bit():
  embedding = np.random.default_rng(0).normal(size=16).astype(np.float32)
  entry = feedback_lib.task_feedback("t", [3, 1], 0.7, ExperienceUnit("some skill text", "skill",
                                                                      "t"), embedding)
  (back,) = feedback_lib.gather_feedback([entry])  # one process: the JSON round trip only
  assert back == entry
  assert np.asarray(back.embeddings[0], np.float32).tobytes() == embedding.tobytes()
  with pytest.raises(ValueError, match="1 units but 0 embeddings"):
    feedback_lib.TaskFeedback("t", (), 0.0, (entry.units[0],), ())


def _members(path):
  with zipfile.ZipFile(path) as archive:
    return {name: archive.read(name) for name in archive.namelist()}


@pytest.mark.slow
def test_two_processes_gather_feedback_and_end_with_identical_graphs(tmp_path, free_port):
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  env["PYTHONPATH"] = f"{REPO}{os.pathsep}{env.get('PYTHONPATH', '')}"
  address = f"127.0.0.1:{free_port}"
  outs = [tmp_path / f"graph_{p}.npz" for p in range(2)]
  procs = [subprocess.Popen([sys.executable, str(HOST), address, str(p), str(outs[p])], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
           for p in range(2)]
  try:
    outputs = [p.communicate(timeout=600)[0] for p in procs]
  finally:
    for p in procs:
      p.kill()  # no-op for a finished process; a hung host must not outlive the test
  for p, output in zip(procs, outputs):
    assert p.returncode == 0, output[-3000:]
  first, second = _members(outs[0]), _members(outs[1])
  assert first.keys() == second.keys()
  for name in first:  # every array and the metadata, byte for byte (zip timestamps aside)
    assert first[name] == second[name], name
