"""sample_token: greedy is the argmax, top-p cuts the tail, top_p = 1 samples the whole vocab."""

import jax
import jax.numpy as jnp
import numpy as np

from memex_jax.sampling import decode

# One row: a dominant id 2 (p ~ 0.6) and a tail over the seven others.
LOGITS = jnp.log(jnp.asarray([[0.05, 0.05, 0.6, 0.05, 0.05, 0.05, 0.1, 0.05]], jnp.float32))


def _draws(temperature: float, top_p: float, n: int = 400) -> np.ndarray:
  keys = jax.random.split(jax.random.PRNGKey(0), n)
  sample = jax.jit(jax.vmap(decode.sample_token, in_axes=(None, 0, None, None)))
  ids, logp = sample(LOGITS, keys, jnp.float32(temperature), jnp.float32(top_p))
  # The logprob is always the untruncated log_softmax of the chosen id.
  np.testing.assert_allclose(logp[:, 0], jax.nn.log_softmax(LOGITS[0])[ids[:, 0]], rtol=1e-6)
  return np.asarray(ids[:, 0])


def test_greedy_is_the_argmax():
  assert set(_draws(0.0, 1.0, n=8).tolist()) == {2}


def test_top_p_keeps_only_the_nucleus():
  assert set(_draws(1.0, 0.5).tolist()) == {2}  # the top id alone holds half the mass
  assert set(_draws(1.0, 0.65).tolist()) == {2, 6}


def test_top_p_one_samples_every_id_at_its_probability():
  ids = _draws(1.0, 1.0, n=2000)
  assert set(ids.tolist()) == set(range(8))
  frequency = np.bincount(ids, minlength=8) / len(ids)
  np.testing.assert_allclose(frequency, np.exp(np.asarray(LOGITS[0])), atol=0.04)
