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


B, T, D, V = 3, 7, 16, 40


def _inputs(embed_axis: int, seed: int):
  """hidden [B T D], kernel, targets [B T], and arbitrary weights [B T] on both outputs (so the
  gradient of each term shows)."""
  keys = jax.random.split(jax.random.PRNGKey(seed), 5)
  hidden = jax.random.normal(keys[0], (B, T, D))
  kernel = jax.random.normal(keys[1], (V, D) if embed_axis == 1 else (D, V))
  targets = jax.random.randint(keys[2], (B, T), 0, V)
  return (hidden, kernel, targets, jax.random.normal(keys[3], (B, T)),
          jax.random.normal(keys[4], (B, T)))


@pytest.mark.parametrize("embed_axis", [1, 0])  # tied [V D] embedding, untied [D V] kernel
def test_chunked_logprobs_and_their_gradients_match_the_one_shot_form(embed_axis):
  hidden, kernel, targets, w_chosen, w_entropy = _inputs(embed_axis, seed=0)

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


@pytest.mark.parametrize("embed_axis", [1, 0])
def test_wanted_positions_only_equal_the_one_shot_form_there_and_zero_elsewhere(embed_axis):
  hidden, kernel, targets, w_chosen, w_entropy = _inputs(embed_axis, seed=1)
  # 8 of 21 positions wanted, scattered over the rows: with 5 tokens per chunk, 2 of 5 chunks run.
  where = jax.random.permutation(jax.random.PRNGKey(2), jnp.arange(B * T) < 8).reshape(B, T)
  head = (kernel, embed_axis)

  def loss(fn, hidden, kernel):
    chosen, entropy = fn(hidden, (kernel, embed_axis))
    return jnp.sum(jnp.where(where, w_chosen * chosen + w_entropy * entropy, 0.0))

  masked = lambda h, hd: logprobs.chunked_logprobs(h, hd, targets, 0.7, chunk_size=5, where=where)
  full = lambda h, hd: _one_shot(h, hd, targets, 0.7)
  for got, want in zip(masked(hidden, head), full(hidden, head)):
    np.testing.assert_allclose(got, jnp.where(where, want, 0.0), rtol=1e-5, atol=1e-5)
  got = jax.grad(lambda h, k: loss(masked, h, k), argnums=(0, 1))(hidden, kernel)
  want = jax.grad(lambda h, k: loss(full, h, k), argnums=(0, 1))(hidden, kernel)
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
  # Nothing wanted: no chunk runs and every output is 0.
  none = jnp.zeros((B, T), bool)
  chosen, entropy = logprobs.chunked_logprobs(hidden, head, targets, chunk_size=5, where=none)
  assert not np.any(chosen) and not np.any(entropy)


@pytest.mark.parametrize("embed_axis", [1, 0])
def test_bfloat16_head_products_round_the_operands_only(embed_axis):
  hidden, kernel, targets, w_chosen, w_entropy = _inputs(embed_axis, seed=2)
  rounded = lambda x: x.astype(jnp.bfloat16).astype(jnp.float32)
  chunked = lambda h, k: logprobs.chunked_logprobs(h, (k, embed_axis), targets, 0.7,
                                                   chunk_size=5, operand_dtype="bfloat16")
  # forward: exactly the float32 computation on bfloat16-rounded hidden states and head
  for got, want in zip(chunked(hidden, kernel),
                       _one_shot(rounded(hidden), (rounded(kernel), embed_axis), targets, 0.7)):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  # backward: the logit gradient is rounded too, so near the float32 gradient, not equal to it
  loss = lambda fn: lambda h, k: jnp.sum(w_chosen * fn(h, k)[0] + w_entropy * fn(h, k)[1])
  got = jax.grad(loss(chunked), argnums=(0, 1))(hidden, kernel)
  want = jax.grad(loss(lambda h, k: _one_shot(h, (k, embed_axis), targets, 0.7)),
                  argnums=(0, 1))(hidden, kernel)
  for g, w in zip(got, want):
    error = float(jnp.max(jnp.abs(g - w)))
    assert 0 < error < 3e-2 * float(jnp.max(jnp.abs(w)))
