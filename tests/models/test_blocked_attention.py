"""Tiled causal attention over a KV cache equals one masked attention."""

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


def test_negative_block_is_refused():
  with pytest.raises(ValueError, match="attention_block=-1"):
    config.tiny(attention_block=-1)
