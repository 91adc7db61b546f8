"""A decode step's attention (one query per row) over a KV cache laid out for it.

The model's cache is [B S K Dh] per layer, the layout a prefill writes and reads in tiles. A
decode step's scores are, per row and kv head, a [G Dh] x [Dh S] product with G = 3 query heads
(SmolLM2): with K as [B S K Dh] the CPU's matrix products first lay the cache out again (a copy
of it per layer and step), and even with K as [B K S Dh] a product against the transposed
operand with three rows ran at a third of memory speed. So a decode call lays each layer's cache
out once, K as [B K Dh S] and V as [B K S Dh] (`DecodeCache`), and both products then read the
cache where it lies, as plain row-major matrix products: 20 rows of 2,304 slots, one layer,
12 ms against 62 ms for the masked weighted sum over [B S K Dh] that it replaces.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

Array = jax.Array


class DecodeCache(NamedTuple):
  """One layer's KV cache in the decode layout; slot s holds position s.

  Attributes:
    k: [B K Dh S] keys, slot-minor, so the scores are q [G Dh] @ k [Dh S].
    v: [B K S Dh] values, so the output is weights [G S] @ v [S Dh].
  """

  k: Array
  v: Array


def from_model_layout(k: Array, v: Array) -> DecodeCache:
  """k, v [B S K Dh] (the model's cache layout) -> the decode layout (copies)."""
  return DecodeCache(jnp.transpose(k, (0, 2, 3, 1)), jnp.swapaxes(v, 1, 2))


def to_model_layout(cache: DecodeCache) -> tuple[Array, Array]:
  """The decode layout -> (k, v) [B S K Dh] (copies)."""
  return jnp.transpose(cache.k, (0, 3, 1, 2)), jnp.swapaxes(cache.v, 1, 2)


def write(cache: DecodeCache, k: Array, v: Array, positions: Array) -> DecodeCache:
  """Writes one new id's k, v [B 1 K Dh] at each row's position [B 1]; a position past the
  cache is dropped. In place when the cache is a loop carry."""
  rows, slot = jnp.arange(k.shape[0]), positions[:, 0]
  # Indices on dims 0 and 3 (2 for V) around a slice: the updated elements are [B K Dh].
  return DecodeCache(
      cache.k.at[rows, :, :, slot].set(k[:, 0].astype(cache.k.dtype), mode="drop"),
      cache.v.at[rows, :, slot].set(v[:, 0].astype(cache.v.dtype), mode="drop"))


def one_query_attention(q: Array, cache: DecodeCache, positions: Array) -> Array:
  """q [B 1 H Dh], positions [B 1] -> [B 1 H Dh].

  The query at position p sees slots 0..p, as `transformer.attention_mask` with a cache says.
  """
  b, _, h, dh = q.shape
  dtype = q.dtype
  kv_heads, s = cache.k.shape[1], cache.k.shape[3]
  q = q.reshape(b, kv_heads, h // kv_heads, dh).astype(jnp.float32) * dh ** -0.5  # B K G Dh
  scores = jnp.einsum("bkds,bkgd->bkgs", cache.k.astype(jnp.float32), q)  # B K G S
  visible = jnp.arange(s)[None, :] <= positions  # B S
  scores = jnp.where(visible[:, None, None, :], scores, -jnp.inf)
  weights = jax.nn.softmax(scores, axis=-1)  # B K G S
  out = jnp.einsum("bkgs,bksd->bkgd", weights, cache.v.astype(jnp.float32))  # B K G Dh
  return out.reshape(b, 1, h, dh).astype(dtype)
