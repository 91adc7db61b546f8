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
