"""Experience summarization: an LLM turns a finished trajectory into a skill or a lesson.

ExpHarness appendix "Experience summarization" and Tables 34-37: a trajectory whose score
reaches `SummarizerConfig.success_score` becomes a skill (what worked), any other a lesson (what
went wrong), with the family's prompt. The summarizer is any `ChatExecutor` (its `complete`),
frozen like the executor. Its reply must hold `SKILL: <text>`; an empty, overlong or garbage
reply (or a failed call) is dropped and counted, never inserted.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from typing import Sequence

from memex_jax.agent.chat import Message
from memex_jax.harness import prompts
from memex_jax.harness.executor import ChatExecutor
from memex_jax.harness.experience import ExperienceUnit

OUTCOMES = ("summarized", "failed", "empty", "overlong", "garbage")

_STATIC_SYSTEM = ("You are an expert at distilling problem-solving experiences into concise, "
                  "reusable lessons. Be brief and generalizable.")
_ALFWORLD_SYSTEM = ("You are an expert at analyzing household robot trajectories. Extract "
                    "specific, actionable lessons from the provided trajectory.")
_STATIC_SKILL = """A {what} was answered correctly.
Question: {task}
Executor answer: {response}
Extract a reusable skill (2-3 sentences):
- Abstract the logic using generic terms such as [Entity], [Quantity], [Condition].
- What key strategy led to success?
Do NOT include specific names, numbers, or answers. Focus on the transferable strategy.
Output format: SKILL: [your skill text]"""
_STATIC_LESSON = """A {what} was answered incorrectly.
Question: {task}
Incorrect executor answer: {response}
Extract a reusable lesson (2-3 sentences):
- trigger_condition: What kind of question caused the error?
- bad_action: What went wrong?
Do NOT include specific names. Focus on the transferable lesson.
Output format: SKILL: [your lesson text]"""
_ALFWORLD_SKILL = """An ALFWorld household task was completed successfully.
Task: {task}
Full trajectory (action -> observation): {response}
Extract a reusable skill (3-5 sentences). Include:
1. The general task category (pick_and_place, heat_then_place, clean_then_place, cool_then_place, examine_in_light, pick_two)
2. The concrete step-by-step strategy that worked
3. Common locations where target objects are found
Be specific. Use actual object/location types (countertop, sinkbasin, microwave).
Output format: SKILL: [your skill text]"""
_ALFWORLD_LESSON = """An ALFWorld household task failed after all steps.
Task: {task}
Trajectory: {response}
Extract a reusable lesson (3-5 sentences). Include:
1. The general task category
2. What specific mistake was made
3. What the agent should have done differently
Output format: SKILL: [your lesson text]"""
_WHAT = {prompts.QA: "question", prompts.MATH: "math problem", prompts.CODE: "coding task"}
_TAG = re.compile(r"(?:SKILL|LESSON)\s*:\s*(.*)", re.IGNORECASE | re.DOTALL)


@dataclasses.dataclass(frozen=True)
class SummarizerConfig:
  """How trajectories become experience units.

  Attributes:
    success_score: a trajectory scoring at least this becomes a skill, below it a lesson.
    max_tokens: the summarizer's reply budget.
    max_chars: a summary longer than this is dropped as overlong (the paper asks for 2-5
      sentences; a runaway reply would crowd the executor's context).
    min_words: a summary with fewer words is dropped as garbage.
    min_letter_fraction: a summary whose characters are less than this fraction letters
      (code, digits, symbols) is dropped as garbage.
    max_input_chars: the task and response are each cut to this many characters in the prompt.
  """

  success_score: float = 0.5
  max_tokens: int = 160
  max_chars: int = 600
  min_words: int = 4
  min_letter_fraction: float = 0.6
  max_input_chars: int = 2000


@dataclasses.dataclass(frozen=True)
class FinishedTrajectory:
  """What the summarizer reads of one task the executor finished.

  Attributes:
    task_id: the task's identifier (the unit's source).
    task_text: the task as the executor saw it, without experiences.
    response: the executor's answer, or an agentic episode's action -> observation transcript.
    score: the task metric's value.
    family: the prompt family (prompts.FAMILIES).
  """

  task_id: str
  task_text: str
  response: str
  score: float
  family: str


def is_skill(trajectory: FinishedTrajectory, config: SummarizerConfig) -> bool:
  """A trajectory scoring at least `success_score` teaches a skill, any other a lesson."""
  return trajectory.score >= config.success_score


def summary_messages(trajectory: FinishedTrajectory, config: SummarizerConfig) -> list[Message]:
  """The [system, user] prompt for one trajectory (Tables 34-37)."""
  skill = is_skill(trajectory, config)
  cut = lambda text: text[:config.max_input_chars]
  fields = {"task": cut(trajectory.task_text), "response": cut(trajectory.response) or "(none)"}
  if trajectory.family == prompts.ALFWORLD:
    template = _ALFWORLD_SKILL if skill else _ALFWORLD_LESSON
    return [Message("system", _ALFWORLD_SYSTEM), Message("user", template.format(**fields))]
  if trajectory.family not in _WHAT:
    raise ValueError(f"no summarizer prompt for family {trajectory.family!r}")
  template = _STATIC_SKILL if skill else _STATIC_LESSON
  return [Message("system", _STATIC_SYSTEM),
          Message("user", template.format(what=_WHAT[trajectory.family], **fields))]


def parse_summary(reply: str, config: SummarizerConfig) -> tuple[str, str]:
  """(outcome, text): the text after SKILL: (or LESSON:), else the whole reply, then checked.

  Outcome is "summarized" or why the reply is dropped: "empty", "overlong", "garbage".
  """
  match = _TAG.search(reply)
  text = (match.group(1) if match else reply).strip()
  text = text.split("<|im_end|>")[0].strip().strip("[]").strip()
  text = " ".join(text.split())
  if not text:
    return "empty", ""
  if len(text) > config.max_chars:
    return "overlong", text
  letters = sum(c.isalpha() for c in text)
  if len(text.split()) < config.min_words or letters < config.min_letter_fraction * len(text):
    return "garbage", text
  return "summarized", text


class Summarizer:
  """Turns finished trajectories into experience units with a frozen chat model.

  Attributes:
    model: the summarizer LLM (any ChatExecutor: the local sampler, an HTTP endpoint).
    config: prompt and filter settings.
    counts: outcome -> trajectories so far (OUTCOMES).
  """

  def __init__(self, model: ChatExecutor, config: SummarizerConfig = SummarizerConfig()):
    self.model, self.config = model, config
    self.counts: collections.Counter[str] = collections.Counter()

  def summarize(self, trajectories: Sequence[FinishedTrajectory]) -> list[ExperienceUnit | None]:
    """One unit per trajectory, in order; None where its summary was dropped (and counted)."""
    if not trajectories:
      return []
    conversations = [summary_messages(t, self.config) for t in trajectories]
    replies = self.model.complete(conversations, [self.config.max_tokens] * len(trajectories))
    units: list[ExperienceUnit | None] = []
    for trajectory, reply in zip(trajectories, replies):
      outcome, text = ("failed", "") if reply.failure else parse_summary(reply.text, self.config)
      self.counts[outcome] += 1
      kind = "skill" if is_skill(trajectory, self.config) else "lesson"
      units.append(ExperienceUnit(text, kind, trajectory.task_id)
                   if outcome == "summarized" else None)
    return units
