"""The shared-prefix cache: the head prefilled once, copied into rows, turns unchanged."""

import jax
import numpy as np

from memex_jax.agent.policy import TurnRequest
from memex_jax.sampling import prefix as prefix_lib
from memex_jax.sampling import sampler as sampler_lib

SYSTEM = ("<|im_start|>system\nYou are a careful household robot. Each turn, think briefly, "
          "then name exactly one action from the list you are given. You are scored on finishing "
          "the task in few steps; repeated actions and malformed answers cost points.<|im_end|>\n")
TASKS = ("Put a clean mug on the desk.", "Find two apples and put them in the fridge.",
         "Turn on the lamp.")


def _context(tok, task):
  return tuple(tok.encode(SYSTEM + f"<|im_start|>user\n{task}<|im_end|>\n<|im_start|>assistant\n"))


def _observation(tok, text):
  return tuple(tok.encode(f"<|im_end|>\n<|im_start|>user\n{text}<|im_end|>\n"
                          "<|im_start|>assistant\n"))


def _sampler(cfg, params, tok, share):
  return sampler_lib.Sampler(cfg, params, tok, sampler_lib.SamplerConfig(
      num_slots=4, cache_length=256, prompt_bucket=32, new_tokens_bucket=16, temperature=0.0,
      share_prefix=share))


def _rollout(sampler, tok):
  """Three episodes start together; then two continue, one resets, and a fourth starts."""
  first = sampler.generate([TurnRequest(i, _context(tok, t), True, 8)
                            for i, t in enumerate(TASKS)])
  second = sampler.generate([
      TurnRequest(0, _observation(tok, "You see a mug."), False, 6),
      TurnRequest(1, _observation(tok, "Nothing happens."), False, 6),
      TurnRequest(2, _context(tok, "Summary: the lamp is on the desk."), True, 6),
      TurnRequest(3, _context(tok, "Open the drawer."), True, 6)])
  return first + second


def test_head_lengths():
  assert prefix_lib.common_length([1, 2, 3], [1, 2, 4, 5]) == 2
  assert prefix_lib.shared_head([[1, 2, 3, 4], [1, 2, 3], [1, 2, 9]]) == 2
  assert prefix_lib.shared_head([[7, 8]]) == 2 and prefix_lib.shared_head([]) == 0


def test_shared_prefix_keeps_greedy_turns_and_prefills_the_head_once(smollm2, smollm2_tokenizer):
  cfg, params = smollm2
  tok = smollm2_tokenizer
  turns, stats = {}, {}
  for share in (False, True):
    sampler = _sampler(cfg, params, tok, share)
    turns[share], stats[share] = _rollout(sampler, tok), sampler.stats
  for want, got in zip(turns[False], turns[True]):
    assert got.ids == want.ids
    np.testing.assert_allclose(got.logprobs, want.logprobs, atol=2e-5, rtol=0)

  contexts = [_context(tok, t) for t in TASKS]
  head = prefix_lib.shared_head(contexts)
  assert head >= len(tok.encode(SYSTEM))
  assert stats[True].prefix_tokens == head  # once, though five contexts start with it
  assert stats[False].prefix_tokens == 0
  # Episode 3's later reset copies the head too (episode 2's row holds it in both samplers).
  saved = 4 * head
  assert stats[False].prefill_tokens - stats[True].prefill_tokens == saved
  assert stats[True].reused_tokens - stats[False].reused_tokens == saved
  assert stats[True].generated_tokens == sum(len(t.ids) for t in turns[True])
  assert stats[True].prefill_s > 0 and stats[True].decode_s > 0


def test_swapped_params_drop_the_cached_head(smollm2, smollm2_tokenizer):
  cfg, params = smollm2
  tok = smollm2_tokenizer
  sampler = _sampler(cfg, params, tok, True)
  requests = [TurnRequest(i, _context(tok, t), True, 8) for i, t in enumerate(TASKS)]
  sampler.generate(requests)
  for episode in range(3):
    sampler.release(episode)
  moved = jax.tree.map(lambda w: w * 1.05, params)
  sampler.params = moved
  assert sampler.shared is None and all(not s.cached for s in sampler.slots)
  got = sampler.generate(requests)
  want = _sampler(cfg, moved, tok, True).generate(requests)
  for g, w in zip(got, want):
    assert g.ids == w.ids
    np.testing.assert_allclose(g.logprobs, w.logprobs, atol=2e-5, rtol=0)
