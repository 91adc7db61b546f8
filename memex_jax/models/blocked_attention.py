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

from memex_jax.models import products

Array = jax.Array
_F32 = jnp.float32
# Masked scores: finite, so a tile a query sees none of gives weights that the first visible
# tile's rescale (exp(_HIDDEN - max)) zeroes, instead of NaNs from exp(-inf - -inf).
_HIDDEN = -1e30


def attention(q: Array, k: Array, v: Array, positions: Array, block: int,
              operand_dtype: str | None = None) -> Array:
  """q [B T H Dh], k/v [B S K Dh] (slot s holds position s), positions [B T] -> [B T H Dh].

  A query at position p sees slots 0..p, as `transformer.attention_mask` with a cache says.
  T and S are padded up to multiples of `block` (pad queries repeat the last position and are
  dropped; pad slots lie past every real position, so no real query sees them).
  `operand_dtype`: see `products`.
  """
  t, s = q.shape[1], k.shape[1]
  pad_t, pad_s = -t % block, -s % block
  q = jnp.pad(q, ((0, 0), (0, pad_t), (0, 0), (0, 0)))
  positions = jnp.pad(positions, ((0, 0), (0, pad_t)), mode="edge")
  k, v = (jnp.pad(x, ((0, 0), (0, pad_s), (0, 0), (0, 0))) for x in (k, v))
  return _tiled(q, k, v, positions, block, operand_dtype)[:, :t]


def _blocks(x: Array, block: int, axis: int) -> Array:
  """x with axis T -> [T/block ..] + x's axes, T replaced by block."""
  shape = x.shape[:axis] + (x.shape[axis] // block, block) + x.shape[axis + 1:]
  return jnp.moveaxis(x.reshape(shape), axis, 0)


def _unblock(x: Array, axis: int) -> Array:
  """`_blocks`' inverse: [NB ..] with a block axis at `axis` + 1 -> that axis of NB x block."""
  x = jnp.moveaxis(x, 0, axis)
  return x.reshape(x.shape[:axis] + (-1,) + x.shape[axis + 2:])


# Tiles keep the batch and kv-head axes first ([B K Bq G Dh] queries against [B K Bk Dh] keys), so
# each product is a batched matmul over contiguous rows: on the CPU ~2x faster than with the
# query axis first in float32, and what the bfloat16 path needs to reach the matrix units.


def _by_kv_head(x: Array, kv_heads: int) -> Array:
  """x [B T H Dh] -> float32 [B K T G Dh] (G query heads share each kv head)."""
  b, t, h, dh = x.shape
  return x.astype(_F32).reshape(b, t, kv_heads, h // kv_heads, dh).transpose(0, 2, 1, 3, 4)


def _grouped(q: Array, kv_heads: int) -> Array:
  """q [B T H Dh] -> scaled float32 [B K T G Dh]."""
  return _by_kv_head(q, kv_heads) * q.shape[-1] ** -0.5


def _heads_last(x: Array) -> Array:
  """[B K T G Dh] -> [B T H Dh]."""
  b, k, t, g, dh = x.shape
  return x.transpose(0, 2, 1, 3, 4).reshape(b, t, k * g, dh)


def _key_blocks(x: Array, block: int) -> Array:
  """k or v [B S K Dh] -> float32 tiles [NK B K Bk Dh]."""
  return _blocks(x.astype(_F32).transpose(0, 2, 1, 3), block, 2)


def _softmax_over_tiles(qi: Array, num_key_blocks: Array, key_tile,
                        operand_dtype: str | None) -> tuple[Array, Array]:
  """Query tile qi [B K Bq G Dh] over key tiles 0..num_key_blocks-1 with a running softmax (the
  max, the sum and the weighted values carried from tile to tile); key_tile(j) -> (masked scores
  [B K Bq G Bk], values [B K Bk Dh]). Returns (out [B K Bq G Dh], log-sum-exp [B K Bq G])."""

  def step(j, carry):
    top, total, acc = carry  # B K Bq G, B K Bq G, B K Bq G Dh
    scores, vj = key_tile(j)
    new_top = jnp.maximum(top, scores.max(axis=-1))
    weights = jnp.exp(scores - new_top[..., None])
    rescale = jnp.exp(top - new_top)
    return (new_top, total * rescale + weights.sum(axis=-1),
            acc * rescale[..., None]
            + products.einsum("bkqgs,bksd->bkqgd", weights, vj, operand_dtype))

  shape = qi.shape[:-1]
  init = (jnp.full(shape, _HIDDEN, _F32), jnp.zeros(shape, _F32), jnp.zeros(qi.shape, _F32))
  top, total, acc = jax.lax.fori_loop(0, num_key_blocks, step, init)
  return acc / total[..., None], top + jnp.log(total)


def _tiled(q: Array, k: Array, v: Array, positions: Array, block: int,
           operand_dtype: str | None) -> Array:
  """`attention` for T and S that are multiples of `block`."""
  s = k.shape[1]
  queries = _blocks(_grouped(q, k.shape[2]), block, 2)  # NQ B K Bq G Dh
  query_positions = _blocks(positions, block, 1)  # NQ B Bq
  keys, values = _key_blocks(k, block), _key_blocks(v, block)  # NK B K Bk Dh

  def query_block(args: tuple[Array, Array]) -> Array:
    qi, pi = args  # B K Bq G Dh, B Bq
    num_key_blocks = jnp.minimum(jnp.max(pi) // block + 1, s // block)

    def key_tile(j):
      scores = products.einsum("bkqgd,bksd->bkqgs", qi, keys[j], operand_dtype)  # B K Bq G Bk
      visible = (j * block + jnp.arange(block))[None, None, :] <= pi[:, :, None]  # B Bq Bk
      return jnp.where(visible[:, None, :, None, :], scores, _HIDDEN), values[j]

    return _softmax_over_tiles(qi, num_key_blocks, key_tile, operand_dtype)[0]

  out = jax.lax.map(query_block, (queries, query_positions))  # NQ B K Bq G Dh
  return _heads_last(_unblock(out, 2)).astype(q.dtype)


# -- training rows: causal self-attention with packed segments, forward and backward in tiles --


def causal_attention(q: Array, k: Array, v: Array, segment_ids: Array | None,
                     block: int, operand_dtype: str | None = None) -> Array:
  """q [B T H Dh], k/v [B T K Dh], segment_ids [B T] or None -> [B T H Dh], differentiable in
  q, k, v.

  Query i sees keys j <= i of its own segment, as `transformer.attention_mask` without a cache.
  T is padded up to a multiple of `block` with a segment no real token has.
  `operand_dtype`: see `products`; forward and backward alike.
  """
  t = q.shape[1]
  if segment_ids is None:
    segment_ids = jnp.zeros(q.shape[:2], jnp.int32)
  pad = -t % block
  q, k, v = (jnp.pad(x, ((0, 0), (0, pad), (0, 0), (0, 0))) for x in (q, k, v))
  segment_ids = jnp.pad(segment_ids.astype(jnp.int32), ((0, 0), (0, pad)),
                        constant_values=jnp.iinfo(jnp.int32).min)
  return _causal(q, k, v, segment_ids, block, operand_dtype)[:, :t]


def _causal_scores(qi: Array, kj: Array, i: Array, j: Array, si: Array, sj: Array,
                   block: int, operand_dtype: str | None) -> Array:
  """Tile (query block i, key block j)'s scores [B K Bq G Bk], _HIDDEN where a query may not
  look: keys after it or in another segment (segments si [B Bq], sj [B Bk])."""
  offsets = jnp.arange(block)
  causal = (j * block + offsets)[None, :] <= (i * block + offsets)[:, None]  # Bq Bk
  visible = causal[None] & (si[:, :, None] == sj[:, None, :])  # B Bq Bk
  scores = products.einsum("bkqgd,bksd->bkqgs", qi, kj, operand_dtype)
  return jnp.where(visible[:, None, :, None, :], scores, _HIDDEN)


def _tiles(q: Array, k: Array, v: Array, segment_ids: Array, block: int):
  """Query-side [NB B K Bq G Dh], key-side [NB B K Bk Dh] x 2 and segments [NB B Bq] tiles."""
  return (_blocks(_grouped(q, k.shape[2]), block, 2), _key_blocks(k, block),
          _key_blocks(v, block), _blocks(segment_ids, block, 1))


def _causal_forward(q: Array, k: Array, v: Array, segment_ids: Array, block: int,
                    operand_dtype: str | None) -> tuple[Array, Array]:
  """(out [B T H Dh], log-sum-exp of each query's scores [NB B K Bq G])."""
  queries, keys, values, segments = _tiles(q, k, v, segment_ids, block)

  def query_block(i: Array) -> tuple[Array, Array]:
    key_tile = lambda j: (_causal_scores(queries[i], keys[j], i, j, segments[i], segments[j],
                                         block, operand_dtype), values[j])
    # The diagonal tile is last.
    return _softmax_over_tiles(queries[i], i + 1, key_tile, operand_dtype)

  out, lse = jax.lax.map(query_block, jnp.arange(q.shape[1] // block))  # NB B K Bq G Dh
  return _heads_last(_unblock(out, 2)).astype(q.dtype), lse


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5))
def _causal(q: Array, k: Array, v: Array, segment_ids: Array, block: int,
            operand_dtype: str | None) -> Array:
  return _causal_forward(q, k, v, segment_ids, block, operand_dtype)[0]


def _causal_fwd(q, k, v, segment_ids, block, operand_dtype):
  out, lse = _causal_forward(q, k, v, segment_ids, block, operand_dtype)
  return out, (q, k, v, segment_ids, out, lse)


def _causal_bwd(block, operand_dtype, residuals, d_out):
  """Gradients tile by tile: query block i against key blocks j <= i, dK and dV accumulated."""
  q, k, v, segment_ids, out, lse = residuals
  t, dh = q.shape[1], q.shape[3]
  kv_heads = k.shape[2]
  queries, keys, values, segments = _tiles(q, k, v, segment_ids, block)
  d_out = _by_kv_head(d_out, kv_heads)  # B K T G Dh
  # delta_i = sum_j P_ij dP_ij = d_out_i . out_i (the softmax's backward term).
  delta = _blocks(jnp.sum(d_out * _by_kv_head(out, kv_heads), -1), block, 2)
  d_outs = _blocks(d_out, block, 2)  # NB B K Bq G Dh
  product = functools.partial(products.einsum, operand_dtype=operand_dtype)

  def query_block(i, carry):
    d_keys, d_values, d_queries = carry
    qi, si, doi, li, di = queries[i], segments[i], d_outs[i], lse[i], delta[i]

    def key_block(j, inner):
      dqi, d_keys, d_values = inner
      p = jnp.exp(_causal_scores(qi, keys[j], i, j, si, segments[j], block, operand_dtype)
                  - li[..., None])
      dp = product("bkqgd,bksd->bkqgs", doi, values[j])
      ds = p * (dp - di[..., None])  # B K Bq G Bk
      d_values = d_values.at[j].add(product("bkqgs,bkqgd->bksd", p, doi))
      d_keys = d_keys.at[j].add(product("bkqgs,bkqgd->bksd", ds, qi))
      return dqi + product("bkqgs,bksd->bkqgd", ds, keys[j]), d_keys, d_values

    dqi, d_keys, d_values = jax.lax.fori_loop(0, i + 1, key_block,
                                              (jnp.zeros_like(qi), d_keys, d_values))
    return d_keys, d_values, d_queries.at[i].set(dqi)

  d_keys, d_values, d_queries = jax.lax.fori_loop(
      0, t // block, query_block, (jnp.zeros_like(keys), jnp.zeros_like(values),
                                   jnp.zeros_like(queries)))
  dq = _heads_last(_unblock(d_queries, 2)) * dh ** -0.5  # queries were scaled
  key_side = lambda x: _unblock(x, 2).transpose(0, 2, 1, 3)  # B S K Dh
  return (dq.astype(q.dtype), key_side(d_keys).astype(k.dtype),
          key_side(d_values).astype(v.dtype), None)


_causal.defvjp(_causal_fwd, _causal_bwd)
