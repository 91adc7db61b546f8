"""Personalized PageRank by power iteration with segment ops (ExpHarness, graph diffusion step).

A random walker starts from the seed distribution q; at every step it restarts at q with
probability rho, otherwise it follows one of its node's out-edges uniformly at random. A walker
on a node without out-edges (a dangling node) restarts at the seeds too, so no mass leaks: with
P the row-stochastic transition matrix and d the indicator of dangling nodes, the stationary
vector solves

  x = rho * q + (1 - rho) * (P^T x + q * (d . x)),

and sums to 1. Larger rho keeps the mass near the seeds (the copilot's R control). The error of
the power iteration after k steps is at most (1 - rho)^k in L1 (0.9^50 ~ 5e-3 at rho = 0.1).

Batching: `seed_weights` may carry trailing batch columns ([N, B], one seed vector per column,
with `restart` [B]). Each iteration is then one sparse-times-dense product over B-wide rows,
which on CPU runs many times faster than `jax.vmap` over B separate vectors (vmap turns the
gather/scatter into batched index ops). `jax.vmap` over the function still works and gives the
same numbers.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def personalized_pagerank(
    senders: jax.Array,
    receivers: jax.Array,
    num_nodes: int,
    seed_weights: jax.Array,
    restart: jax.Array | float,
    num_iters: int,
) -> jax.Array:
  """Returns the personalized PageRank vector(s) of the seed distribution(s).

  Args:
    senders: [E] int32, edge e goes senders[e] -> receivers[e]. Padding edges may point at a
      padding node (jraph's convention); it never holds mass because it is never a seed.
    receivers: [E] int32.
    num_nodes: N, static; every index in senders/receivers must be < N.
    seed_weights: [N] or [N, B] non-negative seed weights; each column is normalised to sum 1.
      A column of zeros (no seeds) gives a column of zeros.
    restart: the restart probability rho in (0, 1]: a scalar, or [B] for [N, B] seeds.
    num_iters: number of power-iteration steps (static).

  Returns:
    [N] or [N, B] float32 stationary distribution(s), each column summing to 1 (0 if unseeded).
  """
  if seed_weights.shape[0] != num_nodes:
    raise ValueError(f"seed_weights has {seed_weights.shape[0]} rows, expected num_nodes={num_nodes}")
  seeds = seed_weights.astype(jnp.float32)
  seeds = seeds / jnp.maximum(seeds.sum(axis=0, keepdims=True), jnp.finfo(jnp.float32).tiny)
  rho = jnp.asarray(restart, jnp.float32)
  # Column broadcasting: x is [N] or [N, B]; per-node arrays get trailing singleton axes.
  trailing = (1,) * (seeds.ndim - 1)

  out_degree = jax.ops.segment_sum(jnp.ones(senders.shape, jnp.float32), senders, num_nodes)
  dangling = (out_degree == 0).reshape((num_nodes,) + trailing)  # N [1]
  edge_weight = (1.0 / jnp.maximum(out_degree, 1.0))[senders].reshape(senders.shape + trailing)

  def step(_, x):  # x: N [B]
    spread = jax.ops.segment_sum(x[senders] * edge_weight, receivers, num_nodes)
    dangling_mass = jnp.sum(jnp.where(dangling, x, 0.0), axis=0)  # [B]
    return rho * seeds + (1.0 - rho) * (spread + dangling_mass * seeds)

  return jax.lax.fori_loop(0, num_iters, step, seeds)
