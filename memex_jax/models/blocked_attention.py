"""Causal attention in tiles, for long prefills and long training rows.

Over a cache of S slots, `jax.nn.dot_product_attention` scores every query against every slot,
[B H T S], and masks the future: a prefill of T = S = 2,048 ids scores twice the pairs it keeps,
through a tensor far larger than the CPU's caches. Here each block of queries visits only the key
blocks up to its last position, with a running softmax (the max and the sum are carried from
block to block), so a prefill from position 0 does half the score work, in tiles that fit cache.

Training rows (no cache) take `causal_attention`, the same tiles with its own backward pass
(flash-attention style: the forward keeps only each query's log-sum-exp, the backward recomputes
each tile's weights), so no [B H T T] tensor exists in either direction.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

Array = jax.Array
_F32 = jnp.float32
# Masked scores: finite, so a tile a query sees none of gives weights that the first visible
# tile's rescale (exp(_HIDDEN - max)) zeroes, instead of NaNs from exp(-inf - -inf).
_HIDDEN = -1e30


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


def _query_blocks(x: Array, block: int) -> Array:
  """x [B T ..] -> [T/block B block ..]."""
  b, t = x.shape[:2]
  return jnp.moveaxis(x.reshape(b, t // block, block, *x.shape[2:]), 1, 0)


def _grouped(q: Array, kv_heads: int) -> Array:
  """q [B T H Dh] -> scaled float32 [B T K G Dh] (G query heads share each kv head)."""
  b, t, h, dh = q.shape
  return (q.astype(_F32) * dh ** -0.5).reshape(b, t, kv_heads, h // kv_heads, dh)


def _softmax_over_tiles(qi: Array, num_key_blocks: Array, key_tile) -> tuple[Array, Array]:
  """Query tile qi [B Bq K G Dh] over key tiles 0..num_key_blocks-1 with a running softmax (the
  max, the sum and the weighted values carried from tile to tile); key_tile(j) -> (masked scores
  [B Bq K G Bk], values [B Bk K Dh]). Returns (out [B Bq K G Dh], log-sum-exp [B Bq K G])."""

  def step(j, carry):
    top, total, acc = carry  # B Bq K G, B Bq K G, B Bq K G Dh
    scores, vj = key_tile(j)
    new_top = jnp.maximum(top, scores.max(axis=-1))
    weights = jnp.exp(scores - new_top[..., None])
    rescale = jnp.exp(top - new_top)
    return (new_top, total * rescale + weights.sum(axis=-1),
            acc * rescale[..., None] + jnp.einsum("bqkgs,bskd->bqkgd", weights, vj))

  shape = qi.shape[:-1]
  init = (jnp.full(shape, _HIDDEN, _F32), jnp.zeros(shape, _F32), jnp.zeros(qi.shape, _F32))
  top, total, acc = jax.lax.fori_loop(0, num_key_blocks, step, init)
  return acc / total[..., None], top + jnp.log(total)


def _tiled(q: Array, k: Array, v: Array, positions: Array, block: int) -> Array:
  """`attention` for T and S that are multiples of `block`."""
  b, t, h, dh = q.shape
  s, kv_heads = k.shape[1], k.shape[2]
  queries = _query_blocks(_grouped(q, kv_heads), block)  # NQ B Bq K G Dh
  query_positions = _query_blocks(positions, block)  # NQ B Bq
  keys = k.reshape(b, s // block, block, kv_heads, dh)  # B NK Bk K Dh
  values = v.reshape(b, s // block, block, kv_heads, dh)

  def query_block(args: tuple[Array, Array]) -> Array:
    qi, pi = args  # B Bq K G Dh, B Bq
    num_key_blocks = jnp.minimum(jnp.max(pi) // block + 1, s // block)

    def key_tile(j):
      kj = jax.lax.dynamic_index_in_dim(keys, j, axis=1, keepdims=False).astype(_F32)  # B Bk K Dh
      vj = jax.lax.dynamic_index_in_dim(values, j, axis=1, keepdims=False).astype(_F32)
      scores = jnp.einsum("bqkgd,bskd->bqkgs", qi, kj)  # B Bq K G Bk
      visible = (j * block + jnp.arange(block))[None, None, :] <= pi[:, :, None]  # B Bq Bk
      return jnp.where(visible[:, :, None, None, :], scores, _HIDDEN), vj

    return _softmax_over_tiles(qi, num_key_blocks, key_tile)[0]

  out = jax.lax.map(query_block, (queries, query_positions))  # NQ B Bq K G Dh
  return jnp.moveaxis(out, 0, 1).reshape(b, t, h, dh).astype(q.dtype)


# -- training rows: causal self-attention with packed segments, forward and backward in tiles --


def causal_attention(q: Array, k: Array, v: Array, segment_ids: Array | None,
                     block: int) -> Array:
  """q [B T H Dh], k/v [B T K Dh], segment_ids [B T] or None -> [B T H Dh], differentiable in
  q, k, v.

  Query i sees keys j <= i of its own segment, as `transformer.attention_mask` without a cache.
  T is padded up to a multiple of `block` with a segment no real token has.
  """
  t = q.shape[1]
  if segment_ids is None:
    segment_ids = jnp.zeros(q.shape[:2], jnp.int32)
  pad = -t % block
  q, k, v = (jnp.pad(x, ((0, 0), (0, pad), (0, 0), (0, 0))) for x in (q, k, v))
  segment_ids = jnp.pad(segment_ids.astype(jnp.int32), ((0, 0), (0, pad)),
                        constant_values=jnp.iinfo(jnp.int32).min)
  return _causal(q, k, v, segment_ids, block)[:, :t]


def _causal_scores(qi: Array, kj: Array, i: Array, j: Array, si: Array, sj: Array,
                   block: int) -> Array:
  """Tile (query block i, key block j)'s scores [B Bq K G Bk], _HIDDEN where a query may not
  look: keys after it or in another segment (segments si [B Bq], sj [B Bk])."""
  offsets = jnp.arange(block)
  causal = (j * block + offsets)[None, :] <= (i * block + offsets)[:, None]  # Bq Bk
  visible = causal[None] & (si[:, :, None] == sj[:, None, :])  # B Bq Bk
  scores = jnp.einsum("bqkgd,bskd->bqkgs", qi, kj)
  return jnp.where(visible[:, :, None, None, :], scores, _HIDDEN)


def _tiles(q: Array, k: Array, v: Array, segment_ids: Array, block: int):
  """Query-side [NB B Bq K G Dh], key-side [NB B Bk K Dh] x 2 and segments [NB B Bq] tiles."""
  return (_query_blocks(_grouped(q, k.shape[2]), block), _query_blocks(k.astype(_F32), block),
          _query_blocks(v.astype(_F32), block), _query_blocks(segment_ids, block))


def _causal_forward(q: Array, k: Array, v: Array, segment_ids: Array,
                    block: int) -> tuple[Array, Array]:
  """(out [B T H Dh], log-sum-exp of each query's scores [NB B Bq K G])."""
  b, t, h, dh = q.shape
  queries, keys, values, segments = _tiles(q, k, v, segment_ids, block)

  def query_block(i: Array) -> tuple[Array, Array]:
    key_tile = lambda j: (_causal_scores(queries[i], keys[j], i, j, segments[i], segments[j],
                                         block), values[j])
    return _softmax_over_tiles(queries[i], i + 1, key_tile)  # the diagonal tile is last

  out, lse = jax.lax.map(query_block, jnp.arange(t // block))  # NB B Bq K G Dh, NB B Bq K G
  return jnp.moveaxis(out, 0, 1).reshape(b, t, h, dh).astype(q.dtype), lse


@functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
def _causal(q: Array, k: Array, v: Array, segment_ids: Array, block: int) -> Array:
  return _causal_forward(q, k, v, segment_ids, block)[0]


def _causal_fwd(q, k, v, segment_ids, block):
  out, lse = _causal_forward(q, k, v, segment_ids, block)
  return out, (q, k, v, segment_ids, out, lse)


def _causal_bwd(block, residuals, d_out):
  """Gradients tile by tile: query block i against key blocks j <= i, dK and dV accumulated."""
  q, k, v, segment_ids, out, lse = residuals
  b, t, h, dh = q.shape
  kv_heads = k.shape[2]
  queries, keys, values, segments = _tiles(q, k, v, segment_ids, block)
  d_out = d_out.astype(_F32).reshape(b, t, kv_heads, h // kv_heads, dh)
  # delta_i = sum_j P_ij dP_ij = d_out_i . out_i (the softmax's backward term).
  delta = _query_blocks(jnp.sum(d_out * out.astype(_F32).reshape(d_out.shape), -1), block)
  d_outs = _query_blocks(d_out, block)  # NB B Bq K G Dh

  def query_block(i, carry):
    d_keys, d_values, d_queries = carry
    qi, si, doi, li, di = queries[i], segments[i], d_outs[i], lse[i], delta[i]

    def key_block(j, inner):
      dqi, d_keys, d_values = inner
      p = jnp.exp(_causal_scores(qi, keys[j], i, j, si, segments[j], block) - li[..., None])
      dp = jnp.einsum("bqkgd,bskd->bqkgs", doi, values[j])
      ds = p * (dp - di[..., None])  # B Bq K G Bk
      d_values = d_values.at[j].add(jnp.einsum("bqkgs,bqkgd->bskd", p, doi))
      d_keys = d_keys.at[j].add(jnp.einsum("bqkgs,bqkgd->bskd", ds, qi))
      return dqi + jnp.einsum("bqkgs,bskd->bqkgd", ds, keys[j]), d_keys, d_values

    dqi, d_keys, d_values = jax.lax.fori_loop(0, i + 1, key_block,
                                              (jnp.zeros_like(qi), d_keys, d_values))
    return d_keys, d_values, d_queries.at[i].set(dqi)

  d_keys, d_values, d_queries = jax.lax.fori_loop(
      0, t // block, query_block, (jnp.zeros_like(keys), jnp.zeros_like(values),
                                   jnp.zeros_like(queries)))
  unblock = lambda x: jnp.moveaxis(x, 0, 1).reshape(b, t, *x.shape[3:])
  dq = unblock(d_queries).reshape(b, t, h, dh) * dh ** -0.5  # queries were scaled
  return (dq.astype(q.dtype), unblock(d_keys).astype(k.dtype), unblock(d_values).astype(v.dtype),
          None)


_causal.defvjp(_causal_fwd, _causal_bwd)
