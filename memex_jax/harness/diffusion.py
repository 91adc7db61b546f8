"""Personalized PageRank by power iteration with segment ops (ExpHarness, graph diffusion step).

A random walker starts from the seed distribution q; at every step it restarts at q with
probability rho, otherwise it follows one of its node's out-edges uniformly at random. A walker
on a node without out-edges (a dangling node) restarts at the seeds too, so no mass leaks: with
P the row-stochastic transition matrix and d the indicator of dangling nodes, the stationary
vector solves

  x = rho * q + (1 - rho) * (P^T x + q * (d . x)),

and sums to 1. Larger rho keeps the mass near the seeds (the copilot's R control).

Stopping: the map above is a (1 - rho)-contraction in L1 (its matrix is column-stochastic), so
after a step that moved x by delta in L1 the remaining error is at most (1 - rho) / rho * delta.
With `tolerance` > 0 the iteration stops as soon as that certified bound is below it for every
column (or after `num_iters` steps), instead of always running `num_iters`: on experience
graphs the walk mixes fast, and a bound of 1e-3 takes 3 (rho = 0.9) to ~20 (rho = 0.1) steps
at 2k-1M nodes where a fixed count would be chosen for the worst case (0.9^50 ~ 5e-3 at
rho = 0.1). Each step is one spread over the edges, so the step count is the latency
(bench/retrieval.py).

Two edge layouts share the iteration: `personalized_pagerank` takes any directed edge list
(senders, receivers) and spreads mass with one gather and one scatter over the edges;
`undirected_personalized_pagerank` takes the experience graph's link table (each node's own
K_nn links and the inverse degrees, link_table.py) and spreads over both directions with K
column gathers and K scatters of N. XLA's scatter is the slow part on CPU: at the same 17 steps,
one-task retrieval at 2k nodes and rho = 0.1 took 2.1-2.3 ms with the edge list and 0.8-1.3 ms
with the table. In an undirected graph the dangling nodes are the isolated ones, which no walker
reaches except by a restart, so their share has a closed form and the loop body carries no
dangling-mass reduction; the degrees come with the table, built when the graph changes. (Both
measured neutral on the 2-core CPU, within its noise; they take work out of every call.)

Batching: `seed_weights` may carry trailing batch columns ([N, B], one seed vector per column,
with `restart` [B]). Each iteration is then one sparse-times-dense product over B-wide rows,
which on CPU runs many times faster than `jax.vmap` over B separate vectors (vmap turns the
gather/scatter into batched index ops). `jax.vmap` over the function still works and gives the
same numbers.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from memex_jax.harness.link_table import LinkTable

_IN_BOUNDS = jax.lax.GatherScatterMode.PROMISE_IN_BOUNDS


def personalized_pagerank(
    senders: jax.Array,
    receivers: jax.Array,
    num_nodes: int,
    seed_weights: jax.Array,
    restart: jax.Array | float,
    num_iters: int,
    tolerance: float = 0.0,
    return_steps: bool = False,
) -> jax.Array | tuple[jax.Array, jax.Array]:
  """Returns the personalized PageRank vector(s) of the seed distribution(s).

  Args:
    senders: [E] int32, edge e goes senders[e] -> receivers[e]. Padding edges may point at a
      padding node (jraph's convention); it never holds mass because it is never a seed.
    receivers: [E] int32.
    num_nodes: N, static; every index in senders/receivers must be < N.
    seed_weights: [N] or [N, B] non-negative seed weights; each column is normalised to sum 1.
      A column of zeros (no seeds) gives a column of zeros.
    restart: the restart probability rho in (0, 1]: a scalar, or [B] for [N, B] seeds.
    num_iters: the most power-iteration steps (static).
    tolerance: stop once every column's certified L1 error, (1 - rho) / rho times its last
      change, is at most this (static); 0 runs `num_iters` steps (fewer only if a step
      changes nothing).
    return_steps: also return the number of steps taken (a scalar int32; with batch columns,
      the most any column took: a certified column stops changing, so each column equals what
      it would be alone).

  Returns:
    [N] or [N, B] float32 stationary distribution(s), each column summing to 1 (0 if unseeded);
    with `return_steps`, the pair (distributions, steps).
  """
  _check_seeds(seed_weights, num_nodes)
  out_degree = jax.ops.segment_sum(jnp.ones(senders.shape, jnp.float32), senders, num_nodes)
  # Scaling by 1/out-degree per node, before the gather, keeps the edge loop to gather + scatter.
  inverse_degree = 1.0 / jnp.maximum(out_degree, 1.0)

  def solve(seeds, rho):
    node_shape = _node_shape(seeds)
    dangling = (out_degree == 0).reshape(node_shape)

    def step(x):  # x: N [B]
      dangling_mass = jnp.sum(jnp.where(dangling, x, 0.0), axis=0)  # [B]
      scaled = x * inverse_degree.reshape(node_shape)
      spread = jax.ops.segment_sum(scaled.at[senders].get(mode=_IN_BOUNDS), receivers, num_nodes,
                                   mode=_IN_BOUNDS)
      return rho * seeds + (1.0 - rho) * (spread + dangling_mass * seeds)

    return _power_iteration(step, seeds, rho, num_iters, tolerance)

  return _solve_normalized(solve, seed_weights, restart, return_steps)


def undirected_personalized_pagerank(
    links: LinkTable,
    seed_weights: jax.Array,
    restart: jax.Array | float,
    num_iters: int,
    tolerance: float = 0.0,
    return_steps: bool = False,
) -> jax.Array | tuple[jax.Array, jax.Array]:
  """`personalized_pagerank` of an undirected graph given as a link table.

  In an undirected graph the dangling nodes are the isolated ones, which no edge reaches, so their
  restarts have a closed form (below) and the loop carries no dangling term.

  Args:
    links: the graph (link_table.py): [K, N] own-link targets, the padding node N - 1 marking
      empty entries, and the [N] inverse degrees.
    seed_weights, restart, num_iters, tolerance, return_steps: as in `personalized_pagerank`.

  Returns:
    As `personalized_pagerank` on the edge list holding both directions of every link.
  """
  num_nodes = links.inverse_degree.shape[0]
  _check_seeds(seed_weights, num_nodes)

  def solve(seeds, rho):
    inverse_degree = links.inverse_degree.reshape(_node_shape(seeds))
    has_edges = inverse_degree > 0
    # The walk that leaks the dangling mass, y = rho q + (1 - rho) P^T y, is the walk that
    # restarts it at the seeds up to a factor: an isolated node v holds x_v = q_v (rho + (1 - rho)
    # D), D the isolated nodes' total mass, so D = rho Q / (1 - (1 - rho) Q) with Q the seeds'
    # weight on isolated nodes, and x = y / (1 - (1 - rho) Q). The factor scales y's error too.
    isolated_weight = jnp.sum(jnp.where(has_edges, 0.0, seeds), axis=0)  # [B]
    scale = 1.0 / (1.0 - (1.0 - rho) * isolated_weight)  # [B]

    def step(y):  # y: N [B]
      scaled = y * inverse_degree  # isolated, dead and padding rows send nothing
      # Own links: K gathers of N. The nodes that linked here: K scatters of N, which beat one
      # of N * K (that copies `scaled` K times first, ~20% of a step). Empty entries gather the
      # padding node's 0 and scatter into the padding row, which the `where` empties.
      spread = sum(scaled.at[column].get(mode=_IN_BOUNDS) for column in links.targets)
      for column in links.targets:
        spread = spread.at[column].add(scaled, mode=_IN_BOUNDS)
      return rho * seeds + (1.0 - rho) * jnp.where(has_edges, spread, 0.0)

    y, steps = _power_iteration(step, seeds, rho, num_iters, tolerance, error_scale=scale)
    return scale * y, steps

  return _solve_normalized(solve, seed_weights, restart, return_steps)


def _check_seeds(seed_weights: jax.Array, num_nodes: int) -> None:
  if seed_weights.shape[0] != num_nodes:
    raise ValueError(
        f"seed_weights has {seed_weights.shape[0]} rows, expected num_nodes={num_nodes}")


def _node_shape(seeds: jax.Array) -> tuple[int, ...]:
  """Per-node arrays broadcast against x, [N] or [N, B], with trailing singleton axes."""
  return seeds.shape[:1] + (1,) * (seeds.ndim - 1)


def _solve_normalized(solve, seed_weights, restart, return_steps):
  """Normalises the seeds, solves one column as a vector, returns what `return_steps` asks for.

  `solve(seeds, rho)` returns (x, steps) for column-normalised seeds.
  """
  rho = jnp.asarray(restart, jnp.float32)
  one_column = seed_weights.ndim == 2 and seed_weights.shape[1] == 1
  if one_column:  # XLA's row gathers/scatters on [N, 1] cost ~20% more per step than on [N].
    seed_weights, rho = seed_weights[:, 0], jnp.reshape(rho, ())
  seeds = seed_weights.astype(jnp.float32)
  seeds = seeds / jnp.maximum(seeds.sum(axis=0, keepdims=True), jnp.finfo(jnp.float32).tiny)
  x, steps = solve(seeds, rho)
  x = x[:, None] if one_column else x
  return (x, steps) if return_steps else x


def _power_iteration(step, seeds, rho, num_iters, tolerance, error_scale=1.0):
  """(x, steps): x <- step(x) from the seeds until every column's error is certified.

  `step` is a (1 - rho)-contraction in L1, so after a step that moved a column by delta its
  error is at most (1 - rho) / rho * delta, times `error_scale` for what the caller rescales.
  """
  error_factor = jnp.broadcast_to(error_scale * (1.0 - rho) / rho, seeds.shape[1:])  # [B]
  batched = seeds.ndim == 2

  def keep_going(carry):
    steps, _, done = carry
    return (steps < num_iters) & ~jnp.all(done)

  def body(carry):
    steps, x, done = carry
    new = step(x)
    error_bound = error_factor * jnp.sum(jnp.abs(new - x), axis=0)  # [B]
    if batched:  # A column stops moving once certified: a task's result ignores its batch.
      new = jnp.where(done, x, new)
    return steps + 1, new, done | (error_bound <= tolerance)

  no_column_done = jnp.zeros(seeds.shape[1:], bool)
  steps, x, _ = jax.lax.while_loop(keep_going, body, (jnp.int32(0), seeds, no_column_done))
  return x, steps
