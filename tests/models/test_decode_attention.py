"""The decode step's one-query attention equals masked dot-product attention over the cache."""

import jax
import jax.numpy as jnp
import numpy as np

from memex_jax.models import decode_attention


def test_one_query_attention_equals_masked_attention_with_grouped_heads():
  b, s, kv_heads, groups, dh = 3, 40, 2, 3, 8
  rng = np.random.default_rng(0)
  q = jnp.asarray(rng.standard_normal((b, 1, kv_heads * groups, dh)), jnp.float32)
  k, v = (jnp.asarray(rng.standard_normal((b, s, kv_heads, dh)), jnp.float32) for _ in range(2))
  positions = jnp.asarray([[0], [17], [39]], jnp.int32)
  mask = jnp.arange(s)[None, None, None, :] <= positions[:, None, :, None]  # B 1 1 S
  want = jax.nn.dot_product_attention(q, k, v, mask=mask)
  cache = decode_attention.from_model_layout(k, v)
  got = decode_attention.one_query_attention(q, cache, positions)
  np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
  # Slots past a row's position are never read: changing them changes nothing.
  k2 = k.at[0, 1:].set(1e3).at[1, 18:].set(-1e3)
  np.testing.assert_allclose(
      decode_attention.one_query_attention(q, decode_attention.from_model_layout(k2, v),
                                           positions), got, atol=1e-6)


def test_decode_layout_round_trips_and_writes_each_rows_own_slot():
  b, s, kv_heads, dh = 3, 10, 2, 4
  rng = np.random.default_rng(1)
  k, v = (jnp.asarray(rng.standard_normal((b, s, kv_heads, dh)), jnp.float32) for _ in range(2))
  cache = decode_attention.from_model_layout(k, v)
  assert cache.k.shape == (b, kv_heads, dh, s) and cache.v.shape == (b, kv_heads, s, dh)
  back = decode_attention.to_model_layout(cache)
  np.testing.assert_array_equal(back[0], k)
  np.testing.assert_array_equal(back[1], v)
  new_k, new_v = (jnp.asarray(rng.standard_normal((b, 1, kv_heads, dh)), jnp.float32)
                  for _ in range(2))
  positions = jnp.asarray([[0], [7], [s]], jnp.int32)  # row 2 writes past the cache: dropped
  got_k, got_v = decode_attention.to_model_layout(
      decode_attention.write(cache, new_k, new_v, positions))
  want_k = k.at[0, 0].set(new_k[0, 0]).at[1, 7].set(new_k[1, 0])
  want_v = v.at[0, 0].set(new_v[0, 0]).at[1, 7].set(new_v[1, 0])
  np.testing.assert_array_equal(got_k, want_k)
  np.testing.assert_array_equal(got_v, want_v)


def test_one_row_decodes_as_jitted_inside_the_model(smollm2):
  """One row per device: the jitted decode step equals the unjitted one (a form of the scores
  that XLA's CPU build got wrong for a single row is kept out)."""
  from memex_jax.models import transformer  # pylint: disable=g-import-not-at-top
  from memex_jax.sampling import decode  # pylint: disable=g-import-not-at-top
  cfg, params = smollm2
  ids = jnp.asarray([[1, 520, 1106, 28, 638, 359, 346]], jnp.int32)
  cache, _ = decode.prefill(cfg, params, transformer.init_cache(cfg, 1, 32), ids,
                            jnp.zeros((1,), jnp.int32), jnp.asarray([7]))
  layers, caches = transformer.unstack_layers(params, cache)
  want, _ = transformer.decode_token(cfg, params, layers, caches, jnp.asarray([5]),
                                     jnp.asarray([7]))
  step = jax.jit(lambda p, c: transformer.decode_token(cfg, p, *transformer.unstack_layers(p, c),
                                                       jnp.asarray([5]), jnp.asarray([7])))
  got, _ = step(params, cache)
  np.testing.assert_allclose(got, want, atol=1e-3)
