"""The JAX sampler on real SmolLM2 weights: greedy and logprob parity, multi-turn slots, int4."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memex_jax.agent.policy import TurnRequest
from memex_jax.models import logprobs as logprobs_lib
from memex_jax.models import quant
from memex_jax.sampling import sampler as sampler_lib

PROMPT = "<|im_start|>user\nName three colours of the rainbow.<|im_end|>\n<|im_start|>assistant\n"


def _teacher_forced(cfg, params, ids, temperature=1.0):
  tokens = jnp.asarray([ids], jnp.int32)
  positions = jnp.arange(len(ids), dtype=jnp.int32)[None]
  fn = jax.jit(logprobs_lib.sequence_logprobs, static_argnames=("cfg", "temperature", "chunk_size"))
  return np.asarray(fn(cfg, params, tokens, positions, temperature=temperature, chunk_size=128))[0]


def _sampler(smollm2, tokenizer, **kw):
  cfg, params = smollm2
  config = sampler_lib.SamplerConfig(num_slots=2, cache_length=256, prompt_bucket=32,
                                     new_tokens_bucket=16, **kw)
  return sampler_lib.Sampler(cfg, params, tokenizer, config)


def test_greedy_matches_transformers(smollm2, smollm2_tokenizer):
  torch = pytest.importorskip("torch")
  from memex_jax.models import hf_io  # pylint: disable=g-import-not-at-top
  model = hf_io.torch_model(*smollm2)
  ids = smollm2_tokenizer.encode(PROMPT)
  with torch.no_grad():
    ref = model.generate(torch.tensor([ids]), max_new_tokens=20, do_sample=False,
                         eos_token_id=None, pad_token_id=0)[0, len(ids):].tolist()
  sampler = _sampler(smollm2, smollm2_tokenizer, temperature=0.0, stop_strings=())
  turn = sampler.generate([TurnRequest(0, tuple(ids), True, 20)])[0]
  assert list(turn.ids) == ref


def test_logprobs_equal_teacher_forced_across_turns(smollm2, smollm2_tokenizer):
  cfg, params = smollm2
  tok = smollm2_tokenizer
  sampler = _sampler(smollm2, tok, temperature=0.8, top_p=0.95, seed=3)
  first = tok.encode(PROMPT)
  other = tok.encode("<|im_start|>user\nCount to five.<|im_end|>\n<|im_start|>assistant\n")
  turns = sampler.generate([TurnRequest(0, tuple(first), True, 12),
                            TurnRequest(1, tuple(other), True, 9)])
  assert 1 <= len(turns[0].ids) <= 12 and 1 <= len(turns[1].ids) <= 9
  # Second turn of episode 0 appends an observation without re-sending the history.
  observation = tok.encode("<|im_end|>\n<|im_start|>user\nAnd two more?<|im_end|>\n"
                           "<|im_start|>assistant\n")
  second = sampler.generate([TurnRequest(0, tuple(observation), False, 10)])[0]
  full = first + list(turns[0].ids) + observation + list(second.ids)
  ref = _teacher_forced(cfg, params, full, temperature=0.8)
  got = np.asarray(turns[0].logprobs + second.logprobs)
  want = np.concatenate([ref[len(first):len(first) + len(turns[0].ids)], ref[-len(second.ids):]])
  np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)
  ref_other = _teacher_forced(cfg, params, other + list(turns[1].ids), temperature=0.8)
  np.testing.assert_allclose(turns[1].logprobs, ref_other[len(other):], atol=1e-4, rtol=1e-4)


def test_reset_reuses_shared_prefix_and_frees_slots(smollm2, smollm2_tokenizer):
  cfg, params = smollm2
  tok = smollm2_tokenizer
  sampler = _sampler(smollm2, tok, temperature=0.0)
  head = tok.encode("<|im_start|>system\nYou are terse.<|im_end|>\n")
  ctx = head + tok.encode("<|im_start|>user\nSay hi.<|im_end|>\n<|im_start|>assistant\n")
  sampler.generate([TurnRequest(0, tuple(ctx), True, 4)])
  reset_ctx = head + tok.encode("<|im_start|>user\nSummary: said hi.<|im_end|>\n"
                                "<|im_start|>assistant\n")
  start, pending, _ = sampler._plan(sampler.slots[sampler._slot_of(0)],
                                 TurnRequest(0, tuple(reset_ctx), True, 4))
  assert start >= len(head) and start + len(pending) == len(reset_ctx)
  turn = sampler.generate([TurnRequest(0, tuple(reset_ctx), True, 6)])[0]
  ref = _teacher_forced(cfg, params, reset_ctx + list(turn.ids))
  np.testing.assert_allclose(turn.logprobs, ref[len(reset_ctx):], atol=1e-4, rtol=1e-4)
  sampler.generate([TurnRequest(1, tuple(ctx), True, 2)])
  with pytest.raises(RuntimeError, match="no free KV slot"):
    sampler.generate([TurnRequest(2, tuple(ctx), True, 2)])
  sampler.release(0)
  assert len(sampler.generate([TurnRequest(2, tuple(ctx), True, 2)])[0].ids) == 2


def test_turns_decoded_in_chunks_equal_whole_turns(smollm2, smollm2_tokenizer):
  """Greedy: the same ids, and logprobs equal to teacher forcing, when a turn is cut into chunks
  of 5 ids and another episode's turn starts while the first is still being written."""
  cfg, params = smollm2
  tok = smollm2_tokenizer
  first = tok.encode(PROMPT)
  other = tok.encode("<|im_start|>user\nCount to five.<|im_end|>\n<|im_start|>assistant\n")
  whole = _sampler(smollm2, tok, temperature=0.0)
  want = whole.generate([TurnRequest(0, tuple(first), True, 17),
                         TurnRequest(1, tuple(other), True, 11)])
  chunked = _sampler(smollm2, tok, temperature=0.0, chunk_tokens=5)
  got = chunked.advance([TurnRequest(0, tuple(first), True, 17)])
  assert got == {} and len(chunked.slots[0].writing.ids) == 5
  with pytest.raises(ValueError, match="before their last one ended"):
    chunked.advance([TurnRequest(0, (1,), False, 4)])
  with pytest.raises(RuntimeError, match="unfinished"):
    chunked.generate([TurnRequest(1, tuple(other), True, 11)])
  got.update(chunked.advance([TurnRequest(1, tuple(other), True, 11)]))
  calls = 2
  while len(got) < 2:
    got.update(chunked.advance([]))
    calls += 1
  assert calls == 4  # 17 ids in chunks of 5; the second turn's 11 fit in the same calls
  assert [got[0].ids, got[1].ids] == [want[0].ids, want[1].ids]
  assert len(got[0].ids) == 17 and chunked.advance([]) == {}
  # The next turn continues from the chunked turn's cache.
  observation = tok.encode("<|im_end|>\n<|im_start|>user\nAnd two more?<|im_end|>\n"
                           "<|im_start|>assistant\n")
  second = chunked.advance([TurnRequest(0, tuple(observation), False, 5)])[0]
  full = first + list(got[0].ids) + observation + list(second.ids)
  ref = _teacher_forced(cfg, params, full)
  np.testing.assert_allclose(got[0].logprobs + second.logprobs,
                             np.concatenate([ref[len(first):len(first) + 17], ref[-5:]]),
                             atol=1e-4, rtol=1e-4)


def test_prefill_in_pieces_equals_one_prefill(smollm2, smollm2_tokenizer):
  """New contexts of different lengths prefilled 8 ids a call: the rows that run out early pad
  the later pieces, and neither their cache nor their next turn is touched by it."""
  cfg, params = smollm2
  tok = smollm2_tokenizer
  questions = ["Hi.", "Name three colours of the rainbow, please.", "Count from one to ten.",
               "What is the capital city of France, and why is it famous?"]
  contexts = [tok.encode(f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n")
              for q in questions]
  observation = tok.encode("<|im_end|>\n<|im_start|>user\nAnd then?<|im_end|>\n"
                           "<|im_start|>assistant\n")
  turns = {}
  for name, piece in (("one call", 0), ("pieces", 8)):
    sampler = sampler_lib.Sampler(cfg, params, tok, sampler_lib.SamplerConfig(
        num_slots=8, cache_length=128, prompt_bucket=8, new_tokens_bucket=8, temperature=0.0,
        stop_strings=(), prefill_chunk=piece))
    first = sampler.generate([TurnRequest(i, tuple(c), True, 4) for i, c in enumerate(contexts)])
    second = sampler.generate([TurnRequest(i, tuple(observation), False, 4) for i in (0, 3)])
    turns[name] = (first, second)
  assert max(map(len, contexts)) > 2 * 8 > min(map(len, contexts))  # pieces and early ends
  for want, got in zip(*(turns[name][0] + turns[name][1] for name in ("one call", "pieces"))):
    assert got.ids == want.ids
    np.testing.assert_allclose(got.logprobs, want.logprobs, atol=1e-4)
  first, second = turns["pieces"]
  for i, turn in zip((0, 3), second):
    full = contexts[i] + list(first[i].ids) + observation + list(turn.ids)
    np.testing.assert_allclose(turn.logprobs, _teacher_forced(cfg, params, full)[-4:], atol=1e-4)


def test_int4_sampler_logprobs_equal_qat_learner(smollm2, smollm2_tokenizer):
  cfg, params = smollm2
  # Group 32 would reproduce SmolLM2's own Q4_1 weights; 64 makes quantization act.
  cfg = cfg.replace(int4_group=64)
  serving = quant.to_int4_serving(params, group=64)
  sampler = sampler_lib.Sampler(cfg.replace(quant="int4_serve"), serving, smollm2_tokenizer,
                                sampler_lib.SamplerConfig(num_slots=1, cache_length=128,
                                                          temperature=1.0, new_tokens_bucket=16))
  ids = smollm2_tokenizer.encode(PROMPT)
  turn = sampler.generate([TurnRequest(0, tuple(ids), True, 12)])[0]
  ref = _teacher_forced(cfg.replace(quant="int4_qat"), params, ids + list(turn.ids))
  np.testing.assert_allclose(turn.logprobs, ref[len(ids):], atol=1e-3, rtol=1e-3)


@pytest.mark.slow
def test_agent_loop_drives_the_real_sampler(smollm2, smollm2_tokenizer):
  """Three turns of two episodes with SmolLM2: whatever it says is parsed and scored."""
  from memex_jax.agent import (AgentConfig, ChatRenderer,  # pylint: disable=g-import-not-at-top
                               EpisodeSpec, run_episodes)
  from memex_jax.envs.toy import VaultEnv, VaultTask  # pylint: disable=g-import-not-at-top
  cfg, params = smollm2
  sampler = sampler_lib.Sampler(cfg, params, smollm2_tokenizer, sampler_lib.SamplerConfig(
      num_slots=2, cache_length=1536, temperature=1.0, prompt_bucket=256, new_tokens_bucket=32,
      seed=0))
  config = AgentConfig(max_steps=3, context_window=1536, threshold=1024, max_turn_tokens=32)
  specs = [EpisodeSpec(VaultEnv(), VaultTask(seed=s, corridor_length=2), group_id=0)
           for s in (1, 2)]
  trajectories = run_episodes(sampler, specs, ChatRenderer(smollm2_tokenizer), config)
  assert len(trajectories) == 2
  for t in trajectories:
    assert not t.error, t.error
    assert t.metrics.steps == 3 or t.metrics.finish_reason != "max_steps"
    assert t.metrics.generated_tokens > 0
    assert 0.0 <= t.metrics.p_format <= 1.0 and 0 <= t.metrics.num_malformed <= t.metrics.steps
    for seg in t.samples:
      sampled = seg.loss_mask.astype(bool)
      assert sampled.any() and np.all(seg.rollout_logprobs[sampled] <= 0)
      assert np.all(seg.rollout_logprobs[~sampled] == 0)
  # Token-in-token-out: the segment is the model's own ids; teacher forcing reproduces logprobs.
  seg = trajectories[0].samples[0]
  ref = _teacher_forced(cfg, params, seg.token_ids.tolist())
  mask = seg.loss_mask.astype(bool)
  np.testing.assert_allclose(seg.rollout_logprobs[mask], ref[mask], atol=2e-4, rtol=2e-4)


def test_new_params_never_reuse_a_prefix_cached_under_the_old_ones(smollm2, smollm2_tokenizer):
  cfg, params = smollm2
  tok = smollm2_tokenizer
  sampler = _sampler(smollm2, tok, temperature=0.0)
  ctx = tok.encode(PROMPT)
  sampler.generate([TurnRequest(0, tuple(ctx), True, 2)])
  sampler.release(0)
  # Same params: the freed slot's cached ids are reused as the next prompt's prefix.
  start, _, _ = sampler._plan(sampler.slots[0], TurnRequest(1, tuple(ctx), True, 2))
  assert start > 0
  scaled = jax.tree.map(lambda x: x * 1.01, params)
  sampler.params = scaled  # the cached K/V belong to the old params
  assert sampler.shared is None
  assert all(not s.cached and not s.pending for s in sampler.slots)
  turn = sampler.generate([TurnRequest(2, tuple(ctx), True, 4)])[0]
  ref = _teacher_forced(cfg, scaled, ctx + list(turn.ids))
  np.testing.assert_allclose(turn.logprobs, ref[len(ctx):], atol=1e-4, rtol=1e-4)
