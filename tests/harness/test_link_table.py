"""The link table holds exactly the GraphsTuple's edges, by owner, through inserts and evictions."""

import numpy as np
import pytest

from memex_jax.harness import graph as graph_lib
from memex_jax.harness.link_table import link_table


def _unit_vectors(count: int, dim: int, seed: int) -> np.ndarray:
  vectors = np.random.default_rng(seed).normal(size=(count, dim)).astype(np.float32)
  return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _edges_of_table(links: np.ndarray) -> list[tuple[int, int]]:
  padding = links.shape[0] - 1
  pairs = [(v, int(u)) for v, row in enumerate(links) for u in row if u != padding]
  return sorted(pairs + [(u, v) for v, u in pairs])


def test_inserts_and_evictions_keep_table_and_edge_list_equal():
  config = graph_lib.GraphConfig(capacity=30, embed_dim=8, grace_insertions=3, edge_threshold=0.0)
  state = graph_lib.init_state(config)
  for step, vector in enumerate(_unit_vectors(70, 8, seed=0)):  # 40 evictions, reused slots
    state, outcome = graph_lib.insert(state, vector, 0, config)
    links = state.links.rows
    assert links.shape == (31, config.k_nn)
    senders, receivers = graph_lib.live_edges(state)
    assert _edges_of_table(links) == sorted(zip(senders.tolist(), receivers.tolist()))
    if outcome.slot >= 0:  # the new node owns exactly the links it made
      own = links[outcome.slot]
      assert sorted(own[own != 30].tolist()) == sorted(outcome.neighbours)
  assert int(state.num_insertions) == 70 and state.num_edges > 100


def test_table_is_canonical_and_rejects_edges_no_insertion_makes():
  inserted_at = np.arange(5)  # row 4 is the padding node
  senders, receivers = np.array([1, 0, 2, 0, 2, 1]), np.array([0, 1, 0, 2, 1, 2])
  table = link_table(senders, receivers, inserted_at, k_nn=2)
  np.testing.assert_array_equal(table.rows, [[4, 4], [0, 4], [0, 1], [4, 4], [4, 4]])
  assert table.targets.flags.c_contiguous  # one contiguous row per link column
  # Degrees 2, 2, 2 (a triangle), none on the isolated node 3 or the padding node 4.
  np.testing.assert_array_equal(table.inverse_degree, np.float32([0.5, 0.5, 0.5, 0, 0]))
  reordered = link_table(senders[::-1], receivers[::-1], inserted_at, k_nn=2)
  np.testing.assert_array_equal(reordered.targets, table.targets)
  np.testing.assert_array_equal(reordered.inverse_degree, table.inverse_degree)
  with pytest.raises(ValueError, match="reverse"):
    link_table(np.array([1]), np.array([0]), inserted_at, k_nn=2)
  with pytest.raises(ValueError, match="self-loops"):
    link_table(np.array([1]), np.array([1]), inserted_at, k_nn=2)
  with pytest.raises(ValueError, match="node 3 owns 3 links"):  # 3 linked to 0, 1 and 2
    link_table(np.array([3, 3, 3, 0, 1, 2]), np.array([0, 1, 2, 3, 3, 3]), inserted_at, k_nn=2)


def test_state_from_arrays_refuses_a_one_way_edge():
  config = graph_lib.GraphConfig(capacity=4, embed_dim=8, grace_insertions=0)
  with pytest.raises(ValueError, match="reverse"):
    graph_lib.state_from_arrays(config, _unit_vectors(3, 8, seed=1), [2], [0])
