"""The Env seam for static task suites: one-step episodes scored by the suite's official metric."""

from __future__ import annotations

from typing import Any, Mapping

from memex_jax.envs.static import metrics
from memex_jax.envs.static import sandbox
from memex_jax.envs.static.sources import TaskRecord


class StaticTaskEnv:
  """One problem per episode: the task text is the prompt, the single step is the answer.

  `reset` takes a TaskRecord or an item of a suite's data source (builders.load_suite). `step`
  scores the answer and ends the episode; `won` is whether the metric counts it as correct, and
  `info` carries the metric's value and detail. Steps after the end are answered, not scored.

  Attributes:
    limits: sandbox limits for suites that run code (HumanEval).
  """

  def __init__(self, limits: sandbox.SandboxLimits = metrics.HUMANEVAL_LIMITS):
    self.limits = limits
    self._record: TaskRecord | None = None
    self._done = True
    self._changed_state = False

  def reset(self, task: TaskRecord | Mapping[str, Any]) -> tuple[str, str]:
    """Starts an episode on `task`; returns (prompt, "")."""
    self._record = task if isinstance(task, TaskRecord) else TaskRecord.from_example(dict(task))
    self._done = False
    self._changed_state = False
    return self._record.prompt, ""

  def step(self, command: str) -> tuple[str, bool, bool, dict[str, Any]]:
    """Scores `command` as the answer; returns (verdict, done=True, won, info)."""
    if self._record is None or self._done:
      self._changed_state = False
      return "The episode is over: there is no question to answer.", True, False, {
          "changed_state": False}
    verdict = metrics.score(self._record, command, self.limits)
    self._done = True
    self._changed_state = True
    observation = f"{'Correct' if verdict.passed else 'Incorrect'} ({verdict.detail})."
    return observation, True, verdict.passed, {
        "changed_state": True, "task_id": self._record.id, "suite": self._record.suite,
        "score": verdict.value, "detail": verdict.detail}

  def changes_state(self, command: str) -> bool:
    """Whether the most recent step(command) was the episode's (scored) answer."""
    del command  # Only the answering step changes anything.
    return self._changed_state
