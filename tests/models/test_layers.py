"""Decoder blocks: the projection's hand-written backward equals autodiff's."""

import jax
import jax.numpy as jnp
import numpy as np

from memex_jax.models import layers


def test_linear_gradients_equal_autodiff_of_the_plain_product():
  keys = jax.random.split(jax.random.PRNGKey(0), 3)
  x = jax.random.normal(keys[0], (2, 5, 8))  # B T In
  kernel = jax.random.normal(keys[1], (8, 6))  # In Out
  weights = jax.random.normal(keys[2], (2, 5, 6))
  plain = lambda x, k: jnp.einsum("bti,io->bto", x, k)
  np.testing.assert_allclose(layers.linear(x, kernel), plain(x, kernel), rtol=1e-6)
  got = jax.grad(lambda x, k: jnp.sum(weights * layers.linear(x, k)), argnums=(0, 1))(x, kernel)
  want = jax.grad(lambda x, k: jnp.sum(weights * plain(x, k)), argnums=(0, 1))(x, kernel)
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def _bf16_product(a, b, spec):
  """The product of a and b rounded to bfloat16, accumulated in float32: what
  matmul_dtype='bfloat16' promises."""
  r = lambda t: t.astype(jnp.bfloat16).astype(jnp.float32)
  return jnp.einsum(spec, r(a), r(b), precision="highest")


def test_linear_in_bfloat16_operands_equals_the_rounded_product_forward_and_backward():
  keys = jax.random.split(jax.random.PRNGKey(1), 3)
  x = jax.random.normal(keys[0], (2, 6, 32))  # B T In
  kernel = jax.random.normal(keys[1], (32, 16))  # In Out
  d_y = jax.random.normal(keys[2], (2, 6, 16))
  y, pullback = jax.vjp(lambda x, k: layers.linear(x, k, "bfloat16"), x, kernel)
  assert y.dtype == jnp.float32
  np.testing.assert_allclose(y, _bf16_product(x, kernel, "bti,io->bto"), rtol=1e-5, atol=1e-5)
  d_x, d_kernel = pullback(d_y)
  np.testing.assert_allclose(d_x, _bf16_product(d_y, kernel, "bto,io->bti"), rtol=1e-5,
                             atol=1e-5)
  np.testing.assert_allclose(d_kernel, _bf16_product(x, d_y, "bti,bto->io"), rtol=1e-5,
                             atol=1e-5)
  # and the rounding is really there: the float32 product differs
  assert np.max(np.abs(y - layers.linear(x, kernel))) > 1e-4

