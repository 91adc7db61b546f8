"""The host-side holder keeps units and graph slots in step."""

import numpy as np
import pytest

from memex_jax.harness import graph as graph_lib
from memex_jax.harness.experience import ExperienceGraph
from memex_jax.harness.experience import ExperienceUnit


def _unit_vectors(count: int, dim: int, seed: int) -> np.ndarray:
  vectors = np.random.default_rng(seed).normal(size=(count, dim)).astype(np.float32)
  return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_units_follow_insertions_duplicates_and_evictions():
  config = graph_lib.GraphConfig(capacity=3, embed_dim=8, grace_insertions=1)
  graph = ExperienceGraph(config, "test-encoder")
  vectors = _unit_vectors(4, 8, seed=0)
  units = [ExperienceUnit(f"lesson {i}", "lesson" if i % 2 else "skill", f"task-{i}")
           for i in range(4)]
  for unit, vector in zip(units[:3], vectors[:3]):
    graph.insert(unit, vector)
  duplicate = graph.insert(ExperienceUnit("again", "skill", "task-9"), vectors[1])
  assert duplicate.slot == -1 and graph.units[1] == units[1]
  graph.record_feedback([1, 2], 1.0)
  outcome = graph.insert(units[3], vectors[3])
  assert outcome.evicted == 0 and graph.units[0] == units[3] and len(graph) == 3
  assert graph.units_at([2, -1, 0]) == [units[2], units[3]]
  assert int(graph.state.nodes.kind[0]) == graph_lib.KINDS.index("lesson")


def test_bad_units_and_slots_raise():
  with pytest.raises(ValueError, match="kind"):
    ExperienceUnit("text", "tip", "task")
  with pytest.raises(ValueError, match="empty"):
    ExperienceUnit("  ", "skill", "task")
  graph = ExperienceGraph(graph_lib.GraphConfig(capacity=2, embed_dim=4, grace_insertions=0),
                          "test-encoder")
  with pytest.raises(ValueError, match="holds no experience unit"):
    graph.units_at([1])
  with pytest.raises(ValueError, match="disagree"):
    ExperienceGraph(graph.config, "test-encoder", state=graph.state,
                    units=[ExperienceUnit("x", "skill", "t"), None])
