"""The slot batcher on a real SmolLM2 sampler: concurrent prompts share decode rounds."""


import pytest

from memex_jax.agent.chat import ChatRenderer, Message
from memex_jax.sampling import complete
from memex_jax.serve.batching import SlotBatcher


@pytest.fixture
def sampler(smollm2_sampler):
  return smollm2_sampler  # 4 slots, a 256-token window, greedy


def test_concurrent_prompts_are_batched_and_match_direct_decoding(sampler, smollm2_tokenizer):
  renderer = ChatRenderer(smollm2_tokenizer)
  prompts = [renderer.prompt_ids([Message("user", f"Count to {n}.")]) for n in range(2, 10)]
  expected = [t.ids for t in complete(sampler, prompts, [2] * len(prompts))]
  # Eight prompts submitted together: the first round waits for its 4 slots to fill (never
  # the minute it may), the next takes the other four.
  batcher = SlotBatcher(sampler, gather_s=60.0)
  try:
    futures = [batcher.submit(p, 2, 0.0, 1.0) for p in prompts]
    turns = [f.result(timeout=300) for f in futures]
  finally:
    batcher.close()
  assert [t.ids for t in turns] == expected
  assert (batcher.rounds, batcher.batched) == (2, 8)


def test_settings_are_never_mixed_and_a_bad_prompt_fails_alone(sampler, smollm2_tokenizer):
  prompt = ChatRenderer(smollm2_tokenizer).prompt_ids([Message("user", "Hi")])
  batcher = SlotBatcher(sampler)
  try:
    greedy = batcher.submit(prompt, 2, 0.0, 1.0)
    hot = batcher.submit(prompt, 2, 1.5, 0.9)
    too_long = batcher.submit([1] * 300, 2, 0.0, 1.0)
    assert len(greedy.result(timeout=300).ids) == 2 and len(hot.result(timeout=300).ids) == 2
    with pytest.raises(ValueError, match="300 ids does not fit the 256-slot cache"):
      too_long.result(timeout=300)
    assert len(batcher.submit(prompt, 1, 0.0, 1.0).result(timeout=300).ids) == 1  # still serving
  finally:
    batcher.close()
  assert batcher.rounds >= 3  # greedy and T=1.5 were decoded in different rounds
  with pytest.raises(RuntimeError, match="closed"):
    batcher.submit(prompt, 1, 0.0, 1.0)


def test_close_fails_what_is_still_queued(sampler, smollm2_tokenizer):
  prompt = ChatRenderer(smollm2_tokenizer).prompt_ids([Message("user", "Hi")])
  batcher = SlotBatcher(sampler)
  futures = [batcher.submit(prompt, 2, t, 1.0) for t in (0.0, 0.5, 0.7, 0.9)]
  batcher.close()
  outcomes = []
  for future in futures:
    try:
      outcomes.append(len(future.result(timeout=300).ids))
    except RuntimeError as e:
      outcomes.append(str(e))
  assert "the server is shutting down" in outcomes  # 4 settings: at most one round ran
  assert all(o == 2 or o == "the server is shutting down" for o in outcomes)
