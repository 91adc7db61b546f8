"""Causal attention over a KV cache in tiles, for long prefills.

Over a cache of S slots, `jax.nn.dot_product_attention` scores every query against every slot,
[B H T S], and masks the future: a prefill of T = S = 2,048 ids scores twice the pairs it keeps,
through a tensor far larger than the CPU's caches. Here each block of queries visits only the key
blocks up to its last position, with a running softmax (the max and the sum are carried from
block to block), so a prefill from position 0 does half the score work, in tiles that fit cache.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array


def attention(q: Array, k: Array, v: Array, positions: Array, block: int) -> Array:
  """q [B T H Dh], k/v [B S K Dh] (slot s holds position s), positions [B T] -> [B T H Dh].

  A query at position p sees slots 0..p, as `transformer.attention_mask` with a cache says.
  T and S are padded up to multiples of `block` (pad queries repeat the last position and are
  dropped; pad slots lie past every real position, so no real query sees them).
  """
  t, s = q.shape[1], k.shape[1]
  pad_t, pad_s = -t % block, -s % block
  q = jnp.pad(q, ((0, 0), (0, pad_t), (0, 0), (0, 0)))
  positions = jnp.pad(positions, ((0, 0), (0, pad_t)), mode="edge")
  k, v = (jnp.pad(x, ((0, 0), (0, pad_s), (0, 0), (0, 0))) for x in (k, v))
  return _tiled(q, k, v, positions, block)[:, :t]


def _tiled(q: Array, k: Array, v: Array, positions: Array, block: int) -> Array:
  """`attention` for T and S that are multiples of `block`."""
  b, t, h, dh = q.shape
  s, kv_heads = k.shape[1], k.shape[2]
  groups = h // kv_heads
  f32 = jnp.float32
  queries = (q.astype(f32) * dh ** -0.5).reshape(b, t // block, block, kv_heads, groups, dh)
  queries = jnp.moveaxis(queries, 1, 0)  # NQ B Bq K G Dh
  query_positions = jnp.moveaxis(positions.reshape(b, t // block, block), 1, 0)  # NQ B Bq
  keys = k.reshape(b, s // block, block, kv_heads, dh)  # B NK Bk K Dh
  values = v.reshape(b, s // block, block, kv_heads, dh)

  def query_block(args: tuple[Array, Array]) -> Array:
    qi, pi = args  # B Bq K G Dh, B Bq
    num_key_blocks = jnp.minimum(jnp.max(pi) // block + 1, s // block)

    def key_block(j, carry):
      top, total, acc = carry  # B Bq K G, B Bq K G, B Bq K G Dh
      kj = jax.lax.dynamic_index_in_dim(keys, j, axis=1, keepdims=False).astype(f32)  # B Bk K Dh
      vj = jax.lax.dynamic_index_in_dim(values, j, axis=1, keepdims=False).astype(f32)
      scores = jnp.einsum("bqkgd,bskd->bqkgs", qi, kj)  # B Bq K G Bk
      slots = j * block + jnp.arange(block)
      visible = slots[None, None, :] <= pi[:, :, None]  # B Bq Bk
      scores = jnp.where(visible[:, :, None, None, :], scores, -jnp.inf)
      # Slot 0 is visible to every query, so `new_top` is finite from the first block on.
      new_top = jnp.maximum(top, scores.max(axis=-1))
      weights = jnp.exp(scores - new_top[..., None])
      rescale = jnp.exp(top - new_top)
      return (new_top, total * rescale + weights.sum(axis=-1),
              acc * rescale[..., None] + jnp.einsum("bqkgs,bskd->bqkgd", weights, vj))

    shape = qi.shape[:-1]
    init = (jnp.full(shape, -jnp.inf, f32), jnp.zeros(shape, f32), jnp.zeros(qi.shape, f32))
    _, total, acc = jax.lax.fori_loop(0, num_key_blocks, key_block, init)
    return acc / total[..., None]

  out = jax.lax.map(query_block, (queries, query_positions))  # NQ B Bq K G Dh
  return jnp.moveaxis(out, 0, 1).reshape(b, t, h, dh).astype(q.dtype)
