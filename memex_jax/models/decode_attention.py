"""Attention of a decode step (one query per row) over a long KV cache, for the CPU.

`jax.nn.dot_product_attention` with grouped K/V heads lays the cache out again for its matrix
products: on the CPU that moves the whole [B S K Dh] cache per layer and step, which dominates a
decode step once the cache is long. Here the output is a weighted sum over slots that reads V
where it lies (SmolLM2, 20 rows of 2,304 slots, one layer, same process: 77 ms against 108 ms,
with an evaluation running beside it).

Left open: the scores as a product summed over Dh (reading K where it lies too) made the layer
3.3x faster (16 vs 53 ms, quiet machine), but with one row per device XLA's CPU build of it
inside the jitted model gives wrong hidden states (decode_token, max diff 29), so the scores
stay a matrix product."""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array


def one_query_attention(q: Array, k: Array, v: Array, positions: Array) -> Array:
  """q [B 1 H Dh], k/v [B S K Dh] (slot s holds position s), positions [B 1] -> [B 1 H Dh].

  The query at position p sees slots 0..p, as `transformer.attention_mask` with a cache says.
  """
  b, _, h, dh = q.shape
  dtype = q.dtype
  s, kv_heads = k.shape[1], k.shape[2]
  q = q.reshape(b, 1, kv_heads, h // kv_heads, dh).astype(jnp.float32) * dh ** -0.5  # B 1 K G Dh
  scores = jnp.einsum("bskd,bkgd->bskg", k.astype(jnp.float32), q[:, 0])  # B S K G
  visible = jnp.arange(s)[None, :] <= positions  # B S
  scores = jnp.where(visible[:, :, None, None], scores, -jnp.inf)
  weights = jax.nn.softmax(scores, axis=1)  # B S K G
  out = (weights[..., None] * v[:, :, :, None, :].astype(jnp.float32)).sum(1)  # B K G Dh
  return out.reshape(b, 1, h, dh).astype(dtype)
