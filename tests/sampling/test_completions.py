"""Single-turn completions on the sampler's slots, on real SmolLM2 weights."""

import pytest

from memex_jax.agent.chat import ChatRenderer, Message
from memex_jax.agent.policy import TurnRequest
from memex_jax.sampling import complete

QUESTIONS = ("Name a colour.", "What is 2 + 2?", "Say hello.", "Count to three.", "Hi!")


@pytest.fixture
def sampler(smollm2_sampler):
  return smollm2_sampler  # 4 slots, a 256-token window, greedy


def _prompts(tokenizer):
  renderer = ChatRenderer(tokenizer)
  return [renderer.prompt_ids([Message("user", q)]) for q in QUESTIONS]


def test_more_prompts_than_slots_come_back_in_order(sampler, smollm2_tokenizer):
  prompts = _prompts(smollm2_tokenizer)
  caps = [2, 1, 2, 2, 1]
  together = complete(sampler, prompts, caps)
  alone = [complete(sampler, [p], [m])[0] for p, m in zip(prompts[-2:], caps[-2:])]
  assert [t.ids for t in together[-2:]] == [t.ids for t in alone]
  assert [len(t.ids) for t in together] == caps  # no <|im_end|> this early
  assert all(s.episode is None for s in sampler.slots)  # every slot released


def test_temperature_override_samples(sampler, smollm2_tokenizer):
  prompt = _prompts(smollm2_tokenizer)[0]
  greedy = complete(sampler, [prompt] * 2, [4, 4])
  hot = complete(sampler, [prompt] * 2, [4, 4], temperature=2.0, top_p=1.0)
  assert greedy[0].ids == greedy[1].ids
  assert any(h.ids != greedy[0].ids for h in hot)  # two draws at T=2 from a 49k vocabulary


def test_refuses_a_sampler_with_live_episodes(sampler, smollm2_tokenizer):
  prompt = _prompts(smollm2_tokenizer)[0]
  sampler.generate([TurnRequest(7, tuple(prompt), True, 1)])
  try:
    with pytest.raises(RuntimeError, match=r"live episodes \[7\]"):
      complete(sampler, [prompt], [2])
  finally:
    sampler.release(7)


def test_a_prompt_that_leaves_no_room_is_refused_and_slots_are_freed(sampler):
  with pytest.raises(ValueError, match="no room"):
    complete(sampler, [[1] * 256], [2])
  assert all(s.episode is None for s in sampler.slots)
  with pytest.raises(ValueError, match="2 prompts but 1 max_tokens"):
    complete(sampler, [[1], [2]], [2])
