"""The retrieval copilot: tag parsing with a counted fallback, its learner sample, and SmolLM2
deciding for real (including a copilot that cannot emit a tag)."""

import numpy as np
import pytest

from memex_jax.harness import prompts
from memex_jax.harness.copilot import (STOP, Copilot, CopilotConfig, copilot_messages,
                                       parse_controls)


@pytest.mark.parametrize("text, expected", [
    ("<search>80:70</search>", (80, 70, True)),
    ("<think>new task type</think> <search> 20 : 10 </search>", (20, 10, True)),
    ("<search>1:2</search> then <search>30:40</search>", (30, 40, True)),  # the last tag
    ("<search>250:7</search>", (100, 7, True)),  # clamped to 100
    ("R=80, W=70", (50, 50, False)),
    ("<search>80</search>", (50, 50, False)),
    ("<search>80:70", (50, 50, False)),
    ("", (50, 50, False)),
])
def test_parse_controls(text, expected):
  assert parse_controls(text) == expected


def test_prompts_per_family():
  config = CopilotConfig()
  alfworld = copilot_messages("put a clean mug in the cabinet", prompts.ALFWORLD, config)
  assert len(alfworld) == 1 and "embodied agent" in alfworld[0].content
  assert "put a clean mug" in alfworld[0].content
  system, user = copilot_messages("What is 3 * 4?", prompts.MATH, config)
  assert "retrieval strategy controller" in system.content
  assert user.content.startswith("Problem: What is 3 * 4?") and "<search>R:W</search>" in user.content
  with pytest.raises(ValueError, match="no copilot prompt"):
    copilot_messages("x", "chess", config)


def test_static_prompts_show_the_example_tags_only_when_asked():
  plain = copilot_messages("How many apples?", prompts.QA, CopilotConfig())[1].content
  shown = copilot_messages("How many apples?", prompts.QA,
                           CopilotConfig(static_examples=True))[1].content
  assert "<search>20:10</search>" not in plain
  assert shown.startswith(plain) and shown.endswith("-> <search>50:40</search>")
  assert shown.count("<search>") == plain.count("<search>") + 3


@pytest.mark.slow
def test_smollm2_decides_and_each_decision_is_a_learner_sample(harness_sampler,
                                                               counting_records):
  copilot = Copilot(harness_sampler, CopilotConfig(max_tokens=24))
  texts = [r.prompt for r in counting_records[:2]]
  decisions = copilot.decide(texts, [prompts.QA] * 2, greedy=True)
  assert len(decisions) == 2
  for d in decisions:
    assert 0 <= d.restart <= 100 and 0 <= d.weight <= 100
    assert (d.restart, d.weight, d.parsed) == parse_controls(d.text)
    assert 1 <= len(d.reply_ids) <= 24 and len(d.reply_logprobs) == len(d.reply_ids)
  # Greedy decoding is deterministic.
  again = copilot.decide(texts, [prompts.QA] * 2, greedy=True)
  assert [d.reply_ids for d in again] == [d.reply_ids for d in decisions]
  sample = decisions[0].sample(trajectory_id=5, reward=1.5)
  n = len(decisions[0].prompt_ids)
  assert sample.loss_mask[:n].sum() == 0 and sample.loss_mask[n:].all()
  np.testing.assert_allclose(sample.rollout_logprobs[n:], decisions[0].reply_logprobs,
                             rtol=1e-6)
  assert sample.reward == 1.5 and sample.trajectory_id == 5


@pytest.mark.slow
def test_a_copilot_that_never_emits_a_tag_falls_back_and_is_counted(harness_sampler,
                                                                    counting_records):
  # One token cannot hold a tag: every decision is the counted 50:50 fallback.
  copilot = Copilot(harness_sampler, CopilotConfig(max_tokens=1))
  decisions = copilot.decide([r.prompt for r in counting_records], [prompts.QA] * 3)
  assert [(d.restart, d.weight, d.parsed) for d in decisions] == [(50, 50, False)] * 3


def test_a_sampler_without_the_stop_is_refused(smollm2_sampler):
  with pytest.raises(ValueError, match=STOP):
    Copilot(smollm2_sampler)


@pytest.mark.slow
def test_a_reply_prefix_is_forced_context_and_part_of_the_parsed_text(harness_sampler,
                                                                      counting_records):
  copilot = Copilot(harness_sampler, CopilotConfig(max_tokens=8, reply_prefix="<search>"))
  (decision,) = copilot.decide([counting_records[0].prompt], [prompts.QA], greedy=True)
  assert decision.text.startswith("<search>")
  prefix = copilot.renderer.tokenizer.encode("<search>")
  assert list(decision.prompt_ids[-len(prefix):]) == prefix  # context, so never trained
  assert (decision.restart, decision.weight, decision.parsed) == parse_controls(decision.text)


def test_a_task_too_long_for_the_window_is_cut_to_leave_the_reply_room(harness_sampler):
  window = harness_sampler.config.cache_length
  long_task = "Which of these is the heaviest? " + "a stone, a feather, " * 400  # ~2,400 ids
  copilot = Copilot(harness_sampler, CopilotConfig(max_tokens=8, max_task_chars=100_000))
  (decision,) = copilot.decide([long_task], [prompts.QA], greedy=True)
  assert window - 8 - 8 <= len(decision.prompt_ids) <= window - 8  # cut near the limit only
  assert "Which of these is the heaviest? a stone" in copilot.renderer.tokenizer.decode(
      list(decision.prompt_ids))
  assert 1 <= len(decision.reply_ids) <= 8
  with pytest.raises(ValueError, match="leaving no room for 760 reply tokens"):
    Copilot(harness_sampler, CopilotConfig(max_tokens=760)).decide(["2 + 2?"], [prompts.QA])
