"""Experience-graph insertion, near-duplicate filter, eviction and utility updates."""

import jax
import numpy as np
import pytest

from memex_jax.harness import graph as graph_lib


def _unit_vectors(count: int, dim: int, seed: int) -> np.ndarray:
  vectors = np.random.default_rng(seed).normal(size=(count, dim)).astype(np.float32)
  return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _edge_set(state: graph_lib.GraphState) -> set[tuple[int, int]]:
  senders, receivers = graph_lib.live_edges(state)
  return set(zip(senders.tolist(), receivers.tolist()))


def _fill(config: graph_lib.GraphConfig, vectors: np.ndarray) -> graph_lib.GraphState:
  state = graph_lib.init_state(config)
  for vector in vectors:
    state, outcome = graph_lib.insert(state, vector, 0, config)
    assert outcome.slot >= 0
  return state


def test_insert_links_k_nearest_above_threshold_in_both_directions():
  config = graph_lib.GraphConfig(capacity=64, embed_dim=16, grace_insertions=0)
  vectors = _unit_vectors(40, 16, seed=0)
  state = _fill(config, vectors[:39])
  edges_before = _edge_set(state)
  state, outcome = graph_lib.insert(state, vectors[39], 1, config)
  similarity = vectors[:39] @ vectors[39]
  want = [int(i) for i in np.argsort(-similarity)[:5] if similarity[i] >= 0.3]
  assert 0 < len(want) and list(outcome.neighbours) == want
  new_edges = _edge_set(state) - edges_before
  assert new_edges == {(39, n) for n in want} | {(n, 39) for n in want}
  # Static shapes, jraph padding convention, receivers sorted.
  senders, receivers = np.asarray(state.graph.senders), np.asarray(state.graph.receivers)
  assert senders.shape == receivers.shape == (config.max_edges,)
  np.testing.assert_array_equal(state.graph.n_edge, [state.num_edges,
                                                     config.max_edges - state.num_edges])
  assert (senders[state.num_edges:] == 64).all() and (receivers[state.num_edges:] == 64).all()
  assert (np.diff(receivers) >= 0).all()
  assert int(state.nodes.kind[39]) == 1 and int(state.nodes.inserted_at[39]) == 39
  shapes = jax.tree.map(np.shape, state)
  assert shapes == jax.tree.map(np.shape, graph_lib.init_state(config))


def test_near_duplicates_are_dropped_and_counted_unless_the_filter_is_off():
  config = graph_lib.GraphConfig(capacity=8, embed_dim=16, grace_insertions=0)
  vectors = _unit_vectors(2, 16, seed=1)
  state = _fill(config, vectors)
  near_copy = vectors[1] + 0.01 * _unit_vectors(1, 16, seed=2)[0]
  state, outcome = graph_lib.insert(state, near_copy, 0, config)
  assert outcome.slot == -1 and outcome.duplicate_of == 1
  assert state.num_nodes == 2 and int(state.num_duplicates) == 1
  unfiltered = graph_lib.GraphConfig(capacity=8, embed_dim=16, grace_insertions=0,
                                     similarity_filter=False)
  state, outcome = graph_lib.insert(state, near_copy, 0, unfiltered)
  assert outcome.slot == 2 and 1 in outcome.neighbours and state.num_nodes == 3


def test_full_graph_evicts_low_utility_rarely_retrieved_node_outside_grace():
  config = graph_lib.GraphConfig(capacity=6, embed_dim=16, grace_insertions=3,
                                 edge_threshold=-1.0)
  vectors = _unit_vectors(8, 16, seed=3)
  state = _fill(config, vectors[:6])
  # Slots 0-2 are out of grace (6 insertions so far, grace 3); 3-5 are still protected.
  state = graph_lib.record_feedback(state, [0, 1], 1.0, config)
  state = graph_lib.record_feedback(state, [3, 4, 5], -1.0, config)
  assert graph_lib.eviction_candidate(state, config) == 2  # the only one with u = 0, n = 0
  state = graph_lib.record_feedback(state, [2], 1.0, config)
  state = graph_lib.record_feedback(state, [2], 1.0, config)
  # Now 0 and 1 (u = 0.1, n = 1) rank below 2 (u = 0.19, n = 2); the tie goes to the oldest.
  state, outcome = graph_lib.insert(state, vectors[6], 0, config)
  assert outcome.evicted == 0 and outcome.slot == 0 and state.num_nodes == 6
  assert int(state.nodes.count[0]) == 0 and float(state.nodes.utility[0]) == 0.0


def test_eviction_deletes_every_edge_of_the_slot_and_a_reused_slot_inherits_none():
  config = graph_lib.GraphConfig(capacity=5, embed_dim=16, grace_insertions=0,
                                 edge_threshold=-1.0, k_nn=2)
  vectors = _unit_vectors(5, 16, seed=4)
  state = _fill(config, vectors)
  assert any(3 in edge for edge in _edge_set(state))
  state = graph_lib.record_feedback(state, [0, 1, 2, 4], 1.0, config)
  # A new vector orthogonal to every live node except a little of node 0: with theta = 0.5 it
  # gets no neighbours, so any edge at slot 3 afterwards would be inherited.
  strict = graph_lib.GraphConfig(capacity=5, embed_dim=16, grace_insertions=0,
                                 edge_threshold=0.5, k_nn=2)
  basis = vectors[[0, 1, 2, 4]]
  orthogonal = _unit_vectors(1, 16, seed=5)[0]
  orthogonal -= basis.T @ np.linalg.lstsq(basis.T, orthogonal, rcond=None)[0]
  state, outcome = graph_lib.insert(state, orthogonal, 1, strict)
  assert outcome.evicted == 3 and outcome.slot == 3 and outcome.neighbours == ()
  assert not any(3 in edge for edge in _edge_set(state))
  assert state.num_edges == len(_edge_set(state))


def test_record_feedback_is_an_ema_toward_the_reward_with_counts():
  config = graph_lib.GraphConfig(capacity=4, embed_dim=8, grace_insertions=0, utility_ema=0.1)
  state = _fill(config, _unit_vectors(3, 8, seed=6))
  state = graph_lib.record_feedback(state, [0, 2, 2], 2.0, config)
  state = graph_lib.record_feedback(state, [2], -1.0, config)
  np.testing.assert_allclose(state.nodes.utility[:3], [0.2, 0.0, 0.9 * 0.2 - 0.1], rtol=1e-6)
  np.testing.assert_array_equal(state.nodes.count[:3], [1, 0, 2])
  assert int(state.num_retrievals) == 2
  with pytest.raises(ValueError, match="live node"):
    graph_lib.record_feedback(state, [3], 1.0, config)
  with pytest.raises(ValueError, match="finite"):
    graph_lib.record_feedback(state, [0], float("nan"), config)


def test_bad_inputs_raise_clear_errors():
  config = graph_lib.GraphConfig(capacity=4, embed_dim=8, grace_insertions=0)
  state = graph_lib.init_state(config)
  with pytest.raises(ValueError, match="shape"):
    graph_lib.insert(state, np.ones(7), 0, config)
  with pytest.raises(ValueError, match="non-zero"):
    graph_lib.insert(state, np.zeros(8), 0, config)
  with pytest.raises(ValueError, match="kind"):
    graph_lib.insert(state, np.ones(8), 2, config)
  with pytest.raises(ValueError, match="grace_insertions"):
    graph_lib.GraphConfig(capacity=4, grace_insertions=4)
  with pytest.raises(ValueError, match="edge endpoints"):
    graph_lib.state_from_arrays(config, _unit_vectors(2, 8, seed=7), [0], [2])
  with pytest.raises(ValueError, match="no live node"):
    graph_lib.evict(state, 0, config)


def test_state_from_arrays_matches_incremental_inserts():
  config = graph_lib.GraphConfig(capacity=10, embed_dim=8, grace_insertions=0)
  incremental = _fill(config, _unit_vectors(7, 8, seed=8))
  senders, receivers = graph_lib.live_edges(incremental)
  rebuilt = graph_lib.state_from_arrays(config, incremental.nodes.embedding[:7],
                                        senders[::-1], receivers[::-1])
  for got, want in zip(jax.tree.leaves(rebuilt), jax.tree.leaves(incremental)):
    np.testing.assert_allclose(got, want, rtol=1e-6)
