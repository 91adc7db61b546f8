"""Retrieval follows seeding -> PPR -> candidates -> UCB blend -> top-K, and its ablations."""

import dataclasses

import jax
import numpy as np
import pytest

from memex_jax.harness import graph as graph_lib
from memex_jax.harness import retrieval


def _unit_vectors(count: int, dim: int, seed: int) -> np.ndarray:
  vectors = np.random.default_rng(seed).normal(size=(count, dim)).astype(np.float32)
  return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _random_state(num_nodes: int, capacity: int, dim: int, seed: int) -> graph_lib.GraphState:
  """A graph built by real insertions, with distinct utilities and counts."""
  config = graph_lib.GraphConfig(capacity=capacity, embed_dim=dim, grace_insertions=0,
                                 edge_threshold=0.1)
  state = graph_lib.init_state(config)
  for vector in _unit_vectors(num_nodes, dim, seed):
    state, _ = graph_lib.insert(state, vector, 0, config)
  rng = np.random.default_rng(seed + 1)
  for _ in range(30):
    used = rng.choice(num_nodes, 4, replace=False)
    state = graph_lib.record_feedback(state, used, float(rng.uniform(-1, 2)), config)
  return state


def _reference(state, query, r_control, w_control, config):
  """The pipeline in float64 numpy with an exact (dense-solve) PageRank."""
  nodes, num_rows = state.nodes, state.capacity + 1
  sims = np.where(nodes.alive, nodes.embedding.astype(np.float64) @ (query / np.linalg.norm(query)),
                  -np.inf)
  seeds = np.argsort(-sims, kind="stable")[:config.num_seeds]
  seeds = seeds[np.isfinite(sims[seeds])]
  q = np.zeros(num_rows)
  q[seeds] = 1.0 / len(seeds)
  senders, receivers = graph_lib.live_edges(state)
  adjacency = np.zeros((num_rows, num_rows))
  np.add.at(adjacency, (senders, receivers), 1.0)
  degree = adjacency.sum(1)
  transition = adjacency / np.maximum(degree, 1)[:, None]
  rho = np.clip(r_control / 100, 0.1, 0.9)
  system = np.eye(num_rows) - (1 - rho) * (transition.T + np.outer(q, degree == 0))
  mass = np.linalg.solve(system, rho * q)
  others = [v for v in np.argsort(-mass, kind="stable")
            if nodes.alive[v] and v not in seeds and mass[v] > 1e-12]
  candidates = np.concatenate([seeds, others[:config.num_ppr_candidates]]).astype(int)
  count = nodes.count[candidates]
  ucb = nodes.utility[candidates] + config.ucb_c * np.sqrt(
      np.log(int(state.num_retrievals) + 1) / np.maximum(count, 1))
  norm = lambda x: (x - x.min()) / (x.max() - x.min() + config.norm_eps)
  lam = w_control / 100
  score = (1 - lam) * norm(sims[candidates]) + lam * norm(ucb)
  return candidates[np.argsort(-score, kind="stable")[:config.top_k]]


@pytest.mark.parametrize("r_control,w_control", [(10, 30), (50, 70), (90, 100)])
def test_matches_float64_reference_pipeline(r_control, w_control):
  state = _random_state(num_nodes=60, capacity=64, dim=8, seed=0)
  config = retrieval.RetrievalConfig(num_ppr_candidates=12, num_iters=300)
  query = _unit_vectors(1, 8, seed=42)
  got = retrieval.retrieve(state, query, np.array([r_control]), np.array([w_control]), config)
  want = _reference(state, query[0], r_control, w_control, config)
  np.testing.assert_array_equal(np.asarray(got.indices[0]), want)
  assert bool(got.valid.all())


def test_batch_rows_equal_single_task_calls_and_controls_clip():
  state = jax.device_put(_random_state(num_nodes=40, capacity=48, dim=8, seed=1))
  queries = _unit_vectors(4, 8, seed=2)
  r_control, w_control = np.array([0, 30, 60, 100]), np.array([100, 0, 55, 20])
  batched = retrieval.retrieve(state, queries, r_control, w_control)
  for b in range(4):
    single = retrieval.retrieve(state, queries[b:b + 1], r_control[b:b + 1], w_control[b:b + 1])
    np.testing.assert_array_equal(single.indices[0], batched.indices[b])
  # rho = clip(R / 100, 0.1, 0.9): R = 0 and R = 10 retrieve the same.
  clipped = retrieval.retrieve(state, queries, np.array([10, 30, 60, 90]), w_control)
  np.testing.assert_array_equal(clipped.indices, batched.indices)



def test_default_tolerance_retrieves_what_a_converged_pagerank_does():
  # Clustered units, as task families give, inserted one by one (real K_nn edges and theta).
  dim, families = 16, 12
  rng = np.random.default_rng(7)
  centers = _unit_vectors(families, dim, seed=8)
  units = centers[rng.integers(0, families, 300)] + 0.25 * rng.normal(size=(300, dim))
  config = graph_lib.GraphConfig(capacity=320, embed_dim=dim, grace_insertions=0)
  state = graph_lib.init_state(config)
  for unit in units.astype(np.float32):
    state, _ = graph_lib.insert(state, unit, 0, config)
  nodes = state.nodes.replace(utility=rng.uniform(-1, 2, 321).astype(np.float32),
                              count=rng.integers(0, 9, 321).astype(np.int32))
  state = jax.device_put(state.replace(graph=state.graph._replace(nodes=nodes),
                                       num_retrievals=np.int32(200)))
  assert state.num_edges > 1000 and state.num_nodes > 250
  queries = centers[rng.integers(0, families, 48)] + 0.3 * rng.normal(size=(48, dim))
  w_control = rng.integers(0, 101, 48)
  converged = retrieval.RetrievalConfig(num_iters=400, ppr_tolerance=0.0)
  default = retrieval.RetrievalConfig()
  assert default.ppr_tolerance > 0
  for r_control in (10, 50, 90):
    r = np.full(48, r_control)
    want = retrieval.retrieve(state, queries, r, w_control, converged)
    got = retrieval.retrieve(state, queries, r, w_control, default)
    got, want = np.asarray(got.indices), np.asarray(want.indices)
    # Same experiences for every task; the order may differ only where blended scores nearly tie.
    np.testing.assert_array_equal(np.sort(got, axis=1), np.sort(want, axis=1))
    assert (got == want).all(axis=1).mean() >= 0.95

def test_diffusion_reaches_a_useful_node_that_similarity_alone_misses():
  dim = 8
  vectors = _unit_vectors(14, dim, seed=3)
  query = vectors[0]
  # Node 13 is dissimilar to the query but linked to seed 0; it has high utility.
  sims = vectors @ query
  config = graph_lib.GraphConfig(capacity=16, embed_dim=dim, grace_insertions=0)
  order = np.argsort(-sims)
  far = order[-1]
  state = graph_lib.state_from_arrays(
      config, vectors, senders=[0, far], receivers=[far, 0],
      utility=np.where(np.arange(14) == far, 2.0, 0.0), count=np.ones(14, np.int32),
      num_retrievals=5)
  seeds_only = dataclasses.replace(retrieval.RetrievalConfig(), diffusion=False)
  for config_used, reached in ((retrieval.RetrievalConfig(), True), (seeds_only, False)):
    got = retrieval.retrieve(state, query[None], np.array([20]), np.array([100]), config_used)
    assert (int(got.indices[0, 0]) == far) == reached
  # Without utility ranking, the order is by similarity: the seeds in cosine order.
  _, no_utility = retrieval.ablation_configs("no_utility_ranking")
  got = retrieval.retrieve(state, query[None], np.array([20]), np.array([100]), no_utility)
  np.testing.assert_array_equal(got.indices[0], order[:10])


def test_ucb_prefers_rarely_retrieved_nodes_at_equal_utility():
  dim = 8
  vectors = _unit_vectors(12, dim, seed=4)
  config = graph_lib.GraphConfig(capacity=12, embed_dim=dim, grace_insertions=0)
  count = np.full(12, 50, np.int32)
  count[7] = 1
  state = graph_lib.state_from_arrays(config, vectors, [], [], utility=np.full(12, 0.5),
                                      count=count, num_retrievals=100)
  got = retrieval.retrieve(state, vectors[3][None], np.array([50]), np.array([100]),
                           retrieval.RetrievalConfig(num_seeds=12))
  assert int(got.indices[0, 0]) == 7


def test_flat_store_and_short_graphs():
  state = _random_state(num_nodes=6, capacity=16, dim=8, seed=5)
  graph_config, flat = retrieval.ablation_configs("flat")
  assert graph_config.k_nn == 0
  query = _unit_vectors(1, 8, seed=6)
  got = retrieval.retrieve(state, query, np.array([50]), np.array([50]), flat)
  sims = state.nodes.embedding[:6] @ query[0]
  np.testing.assert_array_equal(got.indices[0, :6], np.argsort(-sims))
  np.testing.assert_array_equal(got.indices[0, 6:], -1)
  np.testing.assert_allclose(got.similarity[0, :6], np.sort(sims)[::-1], rtol=1e-5)
  # Six live nodes, K = 10: four invalid slots in every mode.
  for name in retrieval.ABLATIONS:
    _, config = retrieval.ablation_configs(name)
    got = retrieval.retrieve(state, query, np.array([50]), np.array([50]), config)
    assert got.indices.shape == (1, 10) and int(got.valid.sum()) == 6
    assert set(np.asarray(got.indices[0, :6]).tolist()) == set(range(6))


def test_bad_configs_raise():
  with pytest.raises(ValueError, match="unknown ablation"):
    retrieval.ablation_configs("no_graph")
  with pytest.raises(ValueError, match="tolerance >= 0"):
    retrieval.RetrievalConfig(ppr_tolerance=-1e-3)
  with pytest.raises(ValueError, match="restart_min"):
    retrieval.RetrievalConfig(restart_min=0.0)
  state = graph_lib.init_state(graph_lib.GraphConfig(capacity=4, embed_dim=8,
                                                     grace_insertions=0))
  with pytest.raises(ValueError, match="capacity 4"):
    retrieval.retrieve(state, _unit_vectors(1, 8, 0), np.array([50]), np.array([50]))
