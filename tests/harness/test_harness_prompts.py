"""Executor prompt templates: one per family; No-Memory differs only by the experience block."""

import pytest

from memex_jax.envs.static.sources import TaskRecord
from memex_jax.harness import prompts
from memex_jax.harness.experience import ExperienceUnit

EXPERIENCES = (ExperienceUnit("Count each object once, then add.", "skill", "t1"),
               ExperienceUnit("Listing items without counting gave wrong totals.", "lesson", "t2"))


def _record(metric):
  return TaskRecord(id="x/0", suite="x", prompt="How many legs do two cats have?", answer="8",
                    metadata={"metric": metric})


@pytest.mark.parametrize("metric, family", [
    ("mmlu", prompts.QA), ("multiple_choice_grade", prompts.QA),
    ("exact_str_match", prompts.QA), ("gsm_symbolic", prompts.MATH),
    ("humaneval", prompts.CODE)])
def test_with_and_without_experiences_differ_only_in_the_block(metric, family):
  record = _record(metric)
  assert prompts.family_of(record) == family
  bare = prompts.static_messages(record)
  rich = prompts.static_messages(record, EXPERIENCES)
  assert [m.role for m in bare] == [m.role for m in rich] == ["system", "user"]
  assert bare[0] == rich[0]  # the same system message
  assert bare[1].content == record.prompt  # the suite's own task text, untouched
  block = prompts.experience_block(EXPERIENCES, family)
  assert rich[1].content == f"{block}\n\n{record.prompt}"
  assert "- [skill] Count each object once, then add." in block
  assert "- [lesson] Listing items without counting gave wrong totals." in block


def test_families_have_their_own_system_messages():
  systems = {prompts.static_messages(_record(m))[0].content
             for m in ("mmlu", "gsm_symbolic", "humaneval")}
  assert len(systems) == 3


def test_agent_task_text():
  assert prompts.agent_task_text("Put a mug in the sink.") == "Put a mug in the sink."
  text = prompts.agent_task_text("Put a mug in the sink.", EXPERIENCES[:1])
  assert text.startswith(prompts.experience_block(EXPERIENCES[:1], prompts.ALFWORLD))
  assert text.endswith("\n\nPut a mug in the sink.")


def test_unknown_metric_or_family_is_refused():
  with pytest.raises(ValueError, match="no prompt family for metric 'bleu'"):
    prompts.family_of(_record("bleu"))
  with pytest.raises(ValueError, match="unknown prompt family 'appworld'"):
    prompts.experience_block(EXPERIENCES, "appworld")
