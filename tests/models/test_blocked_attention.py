"""Tiled causal attention (over a KV cache, and on training rows with its own backward pass)
equals one masked attention."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memex_jax.models import blocked_attention
from memex_jax.models import config
from memex_jax.models import transformer


def test_tiles_equal_masked_attention_at_any_offset_and_padding():
  rng = np.random.default_rng(0)
  b, t, s, h, kv, dh, block = 2, 300, 520, 6, 2, 16, 64  # neither T nor S a multiple of block
  q = jnp.asarray(rng.standard_normal((b, t, h, dh)), jnp.float32)
  k = jnp.asarray(rng.standard_normal((b, s, kv, dh)), jnp.float32)
  v = jnp.asarray(rng.standard_normal((b, s, kv, dh)), jnp.float32)
  positions = jnp.asarray([0, 170])[:, None] + jnp.arange(t)[None]  # row 1 continues a context
  mask = transformer.attention_mask(positions, None, s)
  want = jax.nn.dot_product_attention(q, k, v, mask=mask)
  got = jax.jit(blocked_attention.attention, static_argnums=4)(q, k, v, positions, block)
  np.testing.assert_allclose(got, want, atol=2e-6)


def _packed_rows(rng, b, t, h, kv, dh):
  q = jnp.asarray(rng.standard_normal((b, t, h, dh)), jnp.float32)
  k = jnp.asarray(rng.standard_normal((b, t, kv, dh)), jnp.float32)
  v = jnp.asarray(rng.standard_normal((b, t, kv, dh)), jnp.float32)
  segments = np.ones((b, t), np.int32)
  segments[0, 100:], segments[0, 250:], segments[1, 70:] = 2, 0, 3  # three segments, padding
  return q, k, v, jnp.asarray(segments)


def test_training_tiles_equal_masked_attention_in_value_and_gradient():
  rng = np.random.default_rng(2)
  b, t, h, kv, dh, block = 2, 300, 6, 2, 16, 64  # T not a multiple of block; grouped heads
  q, k, v, segments = _packed_rows(rng, b, t, h, kv, dh)
  positions = jnp.broadcast_to(jnp.arange(t), (b, t))
  mask = transformer.attention_mask(positions, segments, None)
  weights = jnp.asarray(rng.standard_normal((b, t, h, dh)), jnp.float32)
  masked = lambda q, k, v: jnp.sum(jax.nn.dot_product_attention(q, k, v, mask=mask) * weights)
  tiled = lambda q, k, v: jnp.sum(
      blocked_attention.causal_attention(q, k, v, segments, block) * weights)
  np.testing.assert_allclose(blocked_attention.causal_attention(q, k, v, segments, block),
                             jax.nn.dot_product_attention(q, k, v, mask=mask), atol=2e-6)
  want = jax.jit(jax.grad(masked, argnums=(0, 1, 2)))(q, k, v)
  got = jax.jit(jax.grad(tiled, argnums=(0, 1, 2)))(q, k, v)
  for name, g, w in zip("qkv", got, want):
    np.testing.assert_allclose(g, w, atol=2e-5, err_msg=f"d{name}")


def test_model_training_row_with_tiles_equals_without_in_loss_and_gradient():
  cfg = config.tiny("llama", max_position=1024, remat=True)
  ids = jnp.zeros((1, 1), jnp.int32)
  params = nn.meta.unbox(
      transformer.Transformer(cfg).init(jax.random.PRNGKey(0), ids, ids)["params"])
  tokens = jax.random.randint(jax.random.PRNGKey(1), (2, 200), 0, cfg.vocab_size)
  positions = jnp.broadcast_to(jnp.arange(200), (2, 200))
  segments = jnp.concatenate([jnp.ones((2, 120), jnp.int32), 2 * jnp.ones((2, 80), jnp.int32)], 1)
  out = {}
  for block in (0, 64):
    model = transformer.Transformer(cfg.replace(train_attention_block=block))
    loss = lambda p: jnp.mean(model.apply({"params": p}, tokens, positions,
                                          segment_ids=segments)[0] ** 2)
    out[block] = jax.jit(jax.value_and_grad(loss))(params)
    # the tiles, with their own backward (`_causal`), are in the traced loss (with block 0, not)
    assert ("name=_causal" in str(jax.make_jaxpr(loss)(params))) == (block > 0)
  np.testing.assert_allclose(out[64][0], out[0][0], rtol=1e-5)
  for got, want in zip(jax.tree_util.tree_leaves(out[64][1]), jax.tree_util.tree_leaves(out[0][1])):
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-3)


def test_model_prefill_with_tiles_equals_without():
  cfg = config.tiny("llama", max_position=1024)
  ids = jnp.zeros((1, 1), jnp.int32)
  params = nn.meta.unbox(
      transformer.Transformer(cfg).init(jax.random.PRNGKey(0), ids, ids)["params"])
  tokens = jax.random.randint(jax.random.PRNGKey(1), (2, 200), 0, cfg.vocab_size)
  start = jnp.asarray([0, 37])
  positions = start[:, None] + jnp.arange(200)[None]
  out = {}
  for block in (0, 64):
    c = cfg.replace(attention_block=block)
    out[block] = jax.jit(transformer.Transformer(c).apply)(
        {"params": params}, tokens, positions, transformer.init_cache(c, 2, 256))
  np.testing.assert_allclose(out[64][0], out[0][0], atol=2e-5)
  np.testing.assert_allclose(out[64][1]["k"], out[0][1]["k"], atol=2e-5)


@pytest.mark.parametrize("field", ["attention_block", "train_attention_block"])
def test_negative_block_is_refused(field):
  with pytest.raises(ValueError, match=f"^{field}=-1"):
    config.tiny(**{field: -1})


def test_bfloat16_products_stay_near_float32_forward_and_backward():
  rng = np.random.default_rng(3)
  b, t, h, kv, dh, block = 2, 300, 6, 2, 16, 64
  q, k, v, segments = _packed_rows(rng, b, t, h, kv, dh)
  weights = jnp.asarray(rng.standard_normal((b, t, h, dh)), jnp.float32)
  out = {}
  for dtype in (None, "bfloat16"):
    loss = lambda q, k, v: jnp.sum(
        blocked_attention.causal_attention(q, k, v, segments, block, dtype) * weights)
    out[dtype] = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))(q, k, v)
  # bfloat16 keeps 8 bits of mantissa: each product is off by ~2^-8 of its size, not more
  np.testing.assert_allclose(out["bfloat16"][0], out[None][0], rtol=2e-2)
  for name, g, w in zip("qkv", out["bfloat16"][1], out[None][1]):
    scale = float(jnp.max(jnp.abs(w)))
    assert 0 < float(jnp.max(jnp.abs(g - w))) < 3e-2 * scale, f"d{name}"
  positions = jnp.broadcast_to(jnp.arange(t), (b, t))
  prefill = {d: blocked_attention.attention(q, k, v, positions, block, d)
             for d in (None, "bfloat16")}
  assert 0 < float(jnp.max(jnp.abs(prefill["bfloat16"] - prefill[None]))) < 3e-2


def test_unknown_matmul_dtype_is_refused():
  with pytest.raises(ValueError, match="^matmul_dtype='int8'"):
    config.tiny(matmul_dtype="int8")
