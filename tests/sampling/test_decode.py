"""sample_token: greedy is the argmax, top-p cuts the tail, top_p = 1 samples the whole vocab;
a prefill or decode of some cache rows (and the first slots) equals the one of every row on
those rows."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memex_jax.models import config as config_lib
from memex_jax.models import transformer
from memex_jax.sampling import decode
from memex_jax.sampling import stops

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


def _tiny():
  cfg = config_lib.tiny("llama")
  tokens = jnp.zeros((1, 4), jnp.int32)
  return cfg, nn.unbox(transformer.Transformer(cfg).init(jax.random.PRNGKey(0), tokens,
                                                         tokens)["params"])


@pytest.mark.parametrize("slots", [None, 12])
def test_prefill_of_some_rows_and_slots_equals_the_prefill_of_all_on_them(slots):
  cfg, params = _tiny()
  rng = np.random.default_rng(0)
  # Four rows with 3, 0, 5 and 2 ids of context; rows 2 and 0 get 4 and 2 new ids.
  cache = transformer.init_cache(cfg, 4, 16)
  history = rng.integers(1, cfg.vocab_size, (4, 5)).astype(np.int32)
  cache, _ = decode.prefill(cfg, params, cache, jnp.asarray(history), jnp.zeros(4, jnp.int32),
                            jnp.asarray([3, 0, 5, 2], jnp.int32))
  start = np.asarray([3, 0, 5, 2], np.int32)
  new = rng.integers(1, cfg.vocab_size, (4, 4)).astype(np.int32)
  length = np.asarray([2, 0, 4, 0], np.int32)
  want_cache, want_logits = decode.prefill(cfg, params, cache, jnp.asarray(new),
                                           jnp.asarray(start), jnp.asarray(length))
  rows = np.asarray([2, 0], np.int32)
  got_cache, got_logits = decode.prefill_rows(cfg, params, cache, jnp.asarray(rows),
                                              jnp.asarray(new[rows]), jnp.asarray(start[rows]),
                                              jnp.asarray(length[rows]), slots=slots)
  np.testing.assert_allclose(got_logits[rows], want_logits[rows], atol=1e-5)
  assert not np.asarray(got_logits[np.asarray([1, 3])]).any()
  for name in ("k", "v"):
    # The prefilled rows hold what the full prefill wrote; the others are untouched.
    np.testing.assert_allclose(got_cache[name][:, rows, :slots],
                               want_cache[name][:, rows, :slots], atol=1e-5)
    # Slots past `slots` (12; rows 2 and 0 write up to 8 and 6) keep what they held.
    np.testing.assert_array_equal(got_cache[name][:, rows, slots or 16:],
                                  cache[name][:, rows, slots or 16:])
    np.testing.assert_array_equal(got_cache[name][:, np.asarray([1, 3])],
                                  cache[name][:, np.asarray([1, 3])])


def test_decode_of_some_rows_and_slots_equals_the_decode_of_all_on_them():
  cfg, params = _tiny()
  rng = np.random.default_rng(1)
  # Four rows of a 64-slot cache with 6, 9, 3 and 7 ids of context; rows 3 and 1 decode.
  cache = transformer.init_cache(cfg, 4, 64)
  context = jnp.asarray([6, 9, 3, 7], jnp.int32)
  history = jnp.asarray(rng.integers(1, cfg.vocab_size, (4, 9)).astype(np.int32))
  cache, logits = decode.prefill(cfg, params, cache, history, jnp.zeros(4, jnp.int32), context)
  table = stops.build_stop_table([""] * cfg.vocab_size, [], eos_ids=[])
  active = jnp.asarray([False, True, False, True])
  args = (logits, stops.empty_window(table, 4), table, context, active,
          jnp.asarray([0, 5, 0, 5], jnp.int32), jax.random.PRNGKey(0), jnp.float32(0.0),
          jnp.float32(1.0))
  want = decode.decode_steps(cfg, params, cache, *args, max_new_tokens=8)
  rows = jnp.asarray([3, 1], jnp.int32)
  got = decode.decode_rows(cfg, params, cache, *args, max_new_tokens=8, rows=rows, slots=16)
  live, idle = np.asarray([1, 3]), np.asarray([0, 2])
  np.testing.assert_array_equal(got.tokens[live], want.tokens[live])
  np.testing.assert_allclose(got.logprobs[live], want.logprobs[live], atol=1e-5)
  np.testing.assert_array_equal(got.num_tokens, [0, 5, 0, 5])
  assert np.asarray(got.done).all() and not np.asarray(got.tokens[idle]).any()
  for name in ("k", "v"):
    # The decoded rows' first 16 slots hold what the full decode wrote; nothing else changed.
    np.testing.assert_allclose(got.cache[name][:, live, :16], want.cache[name][:, live, :16],
                               atol=1e-5)
    np.testing.assert_array_equal(got.cache[name][:, live, 16:], cache[name][:, live, 16:])
    np.testing.assert_array_equal(got.cache[name][:, idle], cache[name][:, idle])
