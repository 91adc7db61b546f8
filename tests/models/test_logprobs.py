"""Chunked teacher-forced logprobs: values and gradients equal the one-shot log_softmax's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memex_jax.models import logprobs
from memex_jax.models import transformer


def _one_shot(hidden, head, targets, temperature):
  """The reference: full logits, log_softmax, gather; entropy of the same distribution."""
  logp = jax.nn.log_softmax(transformer.logits_from_hidden(hidden, head) / temperature, axis=-1)
  chosen = jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
  return chosen, -jnp.sum(jnp.exp(logp) * logp, axis=-1)


@pytest.mark.parametrize("embed_axis", [1, 0])  # tied [V D] embedding, untied [D V] kernel
def test_chunked_logprobs_and_their_gradients_match_the_one_shot_form(embed_axis):
  b, t, d, v = 3, 7, 16, 40
  keys = jax.random.split(jax.random.PRNGKey(0), 5)
  hidden = jax.random.normal(keys[0], (b, t, d))
  kernel = jax.random.normal(keys[1], (v, d) if embed_axis == 1 else (d, v))
  targets = jax.random.randint(keys[2], (b, t), 0, v)
  # Arbitrary weights on both outputs, so the gradient of each term shows.
  w_chosen, w_entropy = jax.random.normal(keys[3], (b, t)), jax.random.normal(keys[4], (b, t))

  def loss(fn, hidden, kernel):
    chosen, entropy = fn(hidden, (kernel, embed_axis), targets, 0.7)
    return jnp.sum(w_chosen * chosen + w_entropy * entropy)

  # 5 tokens per chunk: 21 positions over rows, the last chunk padded.
  chunked = lambda h, head, y, temp: logprobs.chunked_logprobs(h, head, y, temp, chunk_size=5)
  for got, want in zip(chunked(hidden, (kernel, embed_axis), targets, 0.7),
                       _one_shot(hidden, (kernel, embed_axis), targets, 0.7)):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  got = jax.grad(lambda h, k: loss(chunked, h, k), argnums=(0, 1))(hidden, kernel)
  want = jax.grad(lambda h, k: loss(_one_shot, h, k), argnums=(0, 1))(hidden, kernel)
  for g, w in zip(got, want):
    assert g.shape == w.shape
    np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
