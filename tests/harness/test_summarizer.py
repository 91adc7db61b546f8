"""The summarizer: family prompts, robust parsing with counted drops, and a real SmolLM2 run."""

import pytest

from memex_jax.harness import prompts
from memex_jax.harness.executor import SamplerExecutor
from memex_jax.harness.summarizer import (OUTCOMES, FinishedTrajectory, Summarizer,
                                          SummarizerConfig, parse_summary, summary_messages)

CONFIG = SummarizerConfig(max_chars=120)


@pytest.mark.parametrize("reply, outcome, text", [
    ("SKILL: Count each kind of object separately, then add the counts.", "summarized",
     "Count each kind of object separately, then add the counts."),
    ("Some preamble.\nskill: [Check the units of every quantity before adding.]", "summarized",
     "Check the units of every quantity before adding."),
    ("LESSON:  Do not   answer before reading\nall options.", "summarized",
     "Do not answer before reading all options."),
    ("Re-read the question and list each object before counting.", "summarized",
     "Re-read the question and list each object before counting."),  # no tag: the whole reply
    ("SKILL:", "empty", ""),
    ("   ", "empty", ""),
    ("SKILL: " + "always verify the arithmetic twice " * 10, "overlong", None),
    ("SKILL: 12 + 7 = 19; 19 * 3 = 57", "garbage", None),  # digits and symbols, not a skill
    ("SKILL: ok fine", "garbage", None),  # too few words
])
def test_parse_summary(reply, outcome, text):
  got_outcome, got_text = parse_summary(reply, CONFIG)
  assert got_outcome == outcome
  if text is not None:
    assert got_text == text


def test_prompts_follow_score_and_family():
  math = FinishedTrajectory("t1", "What is 2 + 2?", "4", 1.0, prompts.MATH)
  user = summary_messages(math, CONFIG)[1].content
  assert "answered correctly" in user and "math problem" in user and "SKILL:" in user
  failed = FinishedTrajectory("t2", "put a mug in the cabinet", "> go to sink", 0.0,
                              prompts.ALFWORLD)
  system, user = summary_messages(failed, CONFIG)
  assert "household robot" in system.content
  assert "failed" in user.content and "> go to sink" in user.content
  with pytest.raises(ValueError, match="no summarizer prompt"):
    summary_messages(FinishedTrajectory("t3", "x", "y", 1.0, "chess"), CONFIG)


@pytest.mark.slow
def test_a_real_summarizer_yields_units_or_counted_drops(harness_sampler, counting_records):
  summarizer = Summarizer(SamplerExecutor(harness_sampler), SummarizerConfig(max_tokens=48))
  done = [FinishedTrajectory(r.id, r.prompt, r.answer, score, prompts.QA)
          for r, score in zip(counting_records, [1.0, 0.0, 1.0])]
  units = summarizer.summarize(done)
  assert len(units) == 3 and sum(summarizer.counts.values()) == 3
  assert set(summarizer.counts) <= set(OUTCOMES)
  assert summarizer.counts["summarized"] == sum(u is not None for u in units)
  for trajectory, unit in zip(done, units):
    if unit is not None:
      assert unit.kind == ("skill" if trajectory.score >= 0.5 else "lesson")
      assert unit.source_task == trajectory.task_id and len(unit.text) <= 600
  # A prompt that cannot fit the summarizer's window is a counted failure, not an exception.
  huge = FinishedTrajectory("t9", "word " * 3000, "", 0.0, prompts.QA)
  tight = Summarizer(SamplerExecutor(harness_sampler), SummarizerConfig(max_input_chars=20000))
  assert tight.summarize([huge]) == [None] and tight.counts["failed"] == 1
