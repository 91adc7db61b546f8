"""What a frozen executor is shown: one template per task family, with or without experiences.

ExpHarness improves the executor through its input alone, so the with-experience and the
No-Memory prompts of a task are the same template, and differ only in the experience block
(empty for No-Memory). The task text is the suite's own prompt (its answer-format instructions
are what its metric parses); the family adds the system message and how experiences are
introduced. Families: static QA (multiple choice and short answers), math, code, and ALFWorld
(whose experiences go into the agent's task message).
"""

from __future__ import annotations

from typing import Sequence

from memex_jax.agent.chat import Message
from memex_jax.envs.static.sources import TaskRecord
from memex_jax.harness.experience import ExperienceUnit

QA, MATH, CODE, ALFWORLD = "qa", "math", "code", "alfworld"
FAMILIES = (QA, MATH, CODE, ALFWORLD)
# The family of each static metric (TaskRecord.metadata["metric"]).
METRIC_FAMILY = {"mmlu": QA, "multiple_choice_grade": QA, "exact_str_match": QA,
                 "gsm_symbolic": MATH, "humaneval": CODE}

_SYSTEM = {
    QA: "You are a careful assistant answering questions. Reason briefly if it helps, then "
        "answer exactly in the form the question asks for.",
    MATH: "You are a careful assistant solving math word problems. Work step by step, showing "
          "each calculation, and end with the final answer as the question asks.",
    CODE: "You are an expert Python programmer. Think about the approach, then write a correct, "
          "complete function.",
}
_USE = {
    QA: "Use the experience above where it applies to this question.",
    MATH: "Use the experience above where it applies to this problem.",
    CODE: "Use the experience above where it applies to this task.",
    ALFWORLD: "Use the experience above where it applies to this task.",
}
_HEADER = "Experience from earlier tasks (skills that worked, lessons from failures):"


def family_of(record: TaskRecord) -> str:
  """The prompt family of a static task, from the metric that scores it."""
  metric = record.metadata.get("metric")
  if metric not in METRIC_FAMILY:
    raise ValueError(f"task {record.id}: no prompt family for metric {metric!r}")
  return METRIC_FAMILY[metric]


def experience_block(experiences: Sequence[ExperienceUnit], family: str) -> str:
  """The retrieved experiences as the executor reads them; empty for No-Memory."""
  if family not in FAMILIES:
    raise ValueError(f"unknown prompt family {family!r}; expected one of {FAMILIES}")
  if not experiences:
    return ""
  lines = [f"- [{unit.kind}] {unit.text.strip()}" for unit in experiences]
  return "\n".join([_HEADER, *lines, _USE[family]])


def _with_block(block: str, task_text: str) -> str:
  return f"{block}\n\n{task_text}" if block else task_text


def static_messages(record: TaskRecord,
                    experiences: Sequence[ExperienceUnit] = ()) -> list[Message]:
  """[system, user] of a static task; without experiences, its No-Memory prompt."""
  family = family_of(record)
  block = experience_block(experiences, family)
  return [Message("system", _SYSTEM[family]), Message("user", _with_block(block, record.prompt))]


def agent_task_text(task_text: str, experiences: Sequence[ExperienceUnit] = (),
                    family: str = ALFWORLD) -> str:
  """An agentic task's message to the agent: the experiences first, then the env's task."""
  return _with_block(experience_block(experiences, family), task_text)
