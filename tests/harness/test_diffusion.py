"""Personalized PageRank against an exact sparse solve."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.linalg

from memex_jax.harness.diffusion import personalized_pagerank
from memex_jax.harness.diffusion import undirected_personalized_pagerank
from memex_jax.harness.link_table import link_table


def _random_graph(num_nodes: int, num_edges: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """Random directed edges; the last 5 nodes send none, so dangling nodes exist."""
  rng = np.random.default_rng(seed)
  senders = rng.integers(0, num_nodes - 5, num_edges).astype(np.int32)
  receivers = rng.integers(0, num_nodes, num_edges).astype(np.int32)
  return senders, receivers


def _exact(senders, receivers, num_nodes, seeds, rho) -> np.ndarray:
  """Solves x = rho q + (1 - rho)(P^T x + q (d . x)) directly, in float64."""
  q = seeds / seeds.sum()
  adjacency = scipy.sparse.csr_matrix(
      (np.ones(len(senders)), (senders, receivers)), shape=(num_nodes, num_nodes))
  out_degree = np.asarray(adjacency.sum(axis=1)).ravel()  # duplicate edges count twice
  transition = scipy.sparse.diags(1.0 / np.maximum(out_degree, 1)) @ adjacency
  dangling = (out_degree == 0).astype(np.float64)
  system = (scipy.sparse.eye(num_nodes) - (1 - rho) * transition.T
            - (1 - rho) * scipy.sparse.csr_matrix(np.outer(q, dangling)))
  return scipy.sparse.linalg.spsolve(system.tocsc(), rho * q)


@pytest.mark.parametrize("rho", [0.1, 0.35, 0.9])
def test_matches_exact_sparse_solve(rho):
  num_nodes = 60
  senders, receivers = _random_graph(num_nodes, 200, seed=1)
  seeds = np.zeros(num_nodes)
  seeds[[3, 17, 42]] = 1.0
  want = _exact(senders, receivers, num_nodes, seeds, rho)
  got = jax.jit(personalized_pagerank, static_argnums=(2, 5))(
      senders, receivers, num_nodes, jnp.asarray(seeds), rho, 400)
  np.testing.assert_allclose(np.asarray(got), want, atol=2e-6)
  assert abs(float(got.sum()) - 1.0) < 1e-5
  # The dangling nodes do hold mass, so the restart-to-seeds rule is exercised.
  assert want[-5:].sum() > 1e-3


def test_batched_columns_equal_vmap_and_exact():
  num_nodes = 40
  senders, receivers = _random_graph(num_nodes, 120, seed=2)
  rng = np.random.default_rng(3)
  seeds = np.zeros((3, num_nodes))
  for row in seeds:
    row[rng.choice(num_nodes, 4, replace=False)] = rng.random(4) + 0.1
  rho = np.array([0.15, 0.5, 0.8])
  columns = personalized_pagerank(senders, receivers, num_nodes, jnp.asarray(seeds.T), rho, 300)
  vmapped = jax.vmap(personalized_pagerank, in_axes=(None, None, None, 0, 0, None))(
      senders, receivers, num_nodes, jnp.asarray(seeds), jnp.asarray(rho), 300)
  np.testing.assert_allclose(np.asarray(columns).T, np.asarray(vmapped), atol=1e-6)
  for b in range(3):
    np.testing.assert_allclose(np.asarray(columns[:, b]),
                               _exact(senders, receivers, num_nodes, seeds[b], rho[b]), atol=2e-6)


def test_padding_node_keeps_no_mass_and_unseeded_column_is_zero():
  # Nodes 0-3 real, node 4 the padding node carrying all padding edges (jraph's convention).
  senders = np.array([0, 1, 2, 4, 4], np.int32)
  receivers = np.array([1, 2, 0, 4, 4], np.int32)
  seeds = np.zeros((5, 2), np.float32)
  seeds[0, 0] = 1.0
  x = np.asarray(personalized_pagerank(senders, receivers, 5, seeds, 0.2, 100))
  assert x[4, 0] == 0.0 and x[3, 0] == 0.0  # padding node and the unreachable node
  assert x[:3, 0].min() > 0.2 and abs(x[:, 0].sum() - 1.0) < 1e-5
  np.testing.assert_array_equal(x[:, 1], 0.0)


def test_rejects_seed_vector_of_wrong_length():
  with pytest.raises(ValueError, match="num_nodes=5"):
    personalized_pagerank(np.zeros(1, np.int32), np.zeros(1, np.int32), 5, jnp.ones(4), 0.5, 3)


@pytest.mark.parametrize("rho,tolerance", [(0.1, 1e-2), (0.1, 1e-4), (0.5, 1e-3)])
def test_tolerance_certifies_the_l1_error_and_stops_early(rho, tolerance):
  num_nodes = 80
  senders, receivers = _random_graph(num_nodes, 300, seed=4)
  seeds = np.zeros(num_nodes)
  seeds[[2, 9, 33, 50]] = 1.0
  want = _exact(senders, receivers, num_nodes, seeds, rho)
  got, steps = personalized_pagerank(senders, receivers, num_nodes, jnp.asarray(seeds), rho, 400,
                                     tolerance, return_steps=True)
  assert np.abs(np.asarray(got, np.float64) - want).sum() <= tolerance
  assert 1 < int(steps) < 400
  # Each halving of the certified error costs steps: a tighter tolerance never takes fewer.
  _, tighter = personalized_pagerank(senders, receivers, num_nodes, jnp.asarray(seeds), rho, 400,
                                     tolerance / 100, return_steps=True)
  assert int(tighter) > int(steps)
  # Tolerance 0 runs the given count (fewer only at an exact float32 fixed point).
  _, fixed = personalized_pagerank(senders, receivers, num_nodes, jnp.asarray(seeds), rho, 9,
                                   return_steps=True)
  assert int(fixed) == 9


def test_certified_columns_stop_so_a_batch_equals_its_columns_alone():
  num_nodes = 50
  senders, receivers = _random_graph(num_nodes, 150, seed=5)
  seeds = np.zeros((num_nodes, 3), np.float32)
  seeds[[1, 7], 0] = seeds[[20, 21, 22], 1] = seeds[[40], 2] = 1.0
  rho = np.array([0.9, 0.1, 0.4], np.float32)  # very different step counts
  batch, batch_steps = personalized_pagerank(senders, receivers, num_nodes, seeds, rho, 200, 1e-3,
                                             return_steps=True)
  alone_steps = []
  for b in range(3):
    alone, steps = personalized_pagerank(senders, receivers, num_nodes, seeds[:, b], rho[b], 200,
                                         1e-3, return_steps=True)
    np.testing.assert_allclose(np.asarray(batch[:, b]), np.asarray(alone), atol=1e-7)
    alone_steps.append(int(steps))
  assert int(batch_steps) == max(alone_steps) and min(alone_steps) < max(alone_steps)


def test_link_table_form_equals_the_edge_list_form_and_the_exact_solve():
  # An undirected graph grown by insertions (each node links to <= 3 earlier ones), with isolated
  # nodes (one of them a seed) and the padding node last.
  rng = np.random.default_rng(6)
  num_nodes, padding = 41, 40
  owners, targets = [], []
  for node in range(1, 36):  # nodes 36-39 stay isolated
    for target in rng.choice(node, min(node, 3), replace=False):
      owners.append(node)
      targets.append(int(target))
  senders = np.array(owners + targets, np.int32)
  receivers = np.array(targets + owners, np.int32)
  links = link_table(senders, receivers, np.arange(num_nodes), k_nn=3)
  seeds = np.zeros((num_nodes, 3), np.float32)
  seeds[[0, 5, 37], 0] = seeds[[12, 30], 1] = seeds[[20], 2] = 1.0
  rho = np.array([0.1, 0.5, 0.85], np.float32)
  got = undirected_personalized_pagerank(links, seeds, rho, 300)
  want = personalized_pagerank(senders, receivers, num_nodes, seeds, rho, 300)
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-6)
  assert float(got[padding].max()) == 0.0 and float(got[37, 0]) > 0.0
  for b in range(3):
    np.testing.assert_allclose(
        np.asarray(got[:, b]), _exact(senders, receivers, num_nodes, seeds[:, b], rho[b]),
        atol=2e-6)
  # One column runs as a vector and gives the same column and step count.
  column, steps = undirected_personalized_pagerank(links, seeds[:, :1], rho[:1], 300, 1e-4, True)
  vector, vector_steps = undirected_personalized_pagerank(links, seeds[:, 0], rho[0], 300, 1e-4,
                                                          True)
  assert column.shape == (num_nodes, 1) and int(steps) == int(vector_steps)
  np.testing.assert_array_equal(np.asarray(column[:, 0]), np.asarray(vector))
  # Seeds on isolated nodes alone: every walker restarts where it began, so x = q.
  alone = np.zeros(num_nodes, np.float32)
  alone[[36, 38]] = [1.0, 3.0]
  np.testing.assert_allclose(np.asarray(undirected_personalized_pagerank(links, alone, 0.2, 50)),
                             alone / 4, atol=1e-7)


def _barbell_links(clique: int) -> tuple[np.ndarray, np.ndarray]:
  """Two cliques joined by one edge: the walk leaves a clique slowly, so the error bound is tight."""
  owners, targets = [], []
  for base in (0, clique):
    for node in range(base + 1, base + clique):
      owners += [node] * (node - base)
      targets += list(range(base, node))
  owners.append(clique)
  targets.append(clique - 1)
  return np.array(owners + targets, np.int32), np.array(targets + owners, np.int32)


@pytest.mark.parametrize("rho,tolerance", [(0.1, 1e-2), (0.2, 1e-4)])
def test_link_table_form_certifies_its_error_with_isolated_seeds(rho, tolerance):
  # Three quarters of the seed weight sit on an isolated node, where the closed-form restart
  # rescales the walk, and its error bound, by 1 / (1 - (1 - rho) 3/4). On this slow-mixing graph
  # the bound is tight: the error reaches 0.6-0.8 of the tolerance, and 1.6-2.0 times it when the
  # bound leaves the factor out.
  clique = 6
  senders, receivers = _barbell_links(clique)
  num_nodes = 2 * clique + 2  # the isolated node 12, the padding node 13
  links = link_table(senders, receivers, np.arange(num_nodes), k_nn=clique - 1)
  seeds = np.zeros(num_nodes, np.float32)
  seeds[[0, 2 * clique]] = [1.0, 3.0]
  got, steps = undirected_personalized_pagerank(links, seeds, rho, 400, tolerance, True)
  want = _exact(senders, receivers, num_nodes, seeds, rho)
  assert np.abs(np.asarray(got, np.float64) - want).sum() <= tolerance
  assert 1 < int(steps) < 400
