"""A task as the harness handles it: its id, text, prompt family and what the executor takes.

The copilot and the encoder read `text` (the task without experiences), the summarizer reads it
with the executor's response, and the executor gets `executor_task`. Static suites and ALFWorld
games both become `HarnessTask`s, so training and evaluation treat them alike.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from memex_jax.envs.static.sources import TaskRecord
from memex_jax.harness import prompts
from memex_jax.harness.executor import ExecutorTask


@dataclasses.dataclass(frozen=True)
class HarnessTask:
  """One task of a suite.

  Attributes:
    task_id: unique across the run (the s_without cache and experience units key on it).
    suite: the suite it belongs to (evaluation tables group by it).
    text: the task's text without experiences (what the copilot and the encoder read).
    family: its prompt family (prompts.FAMILIES).
    executor_task: what the executor's `solve` takes.
    agentic: a multi-step episode (evaluation reports its mean steps).
  """

  task_id: str
  suite: str
  text: str
  family: str
  executor_task: ExecutorTask
  agentic: bool = False


def static_task(record: TaskRecord, max_tokens: int = 512) -> HarnessTask:
  """A static suite's record as a harness task."""
  return HarnessTask(task_id=record.id, suite=record.suite, text=record.prompt,
                     family=prompts.family_of(record),
                     executor_task=ExecutorTask(record, max_tokens))


def agentic_task(task_id: str, suite: str, text: str, env_task: Any,
                 max_tokens: int = 512, family: str = prompts.ALFWORLD) -> HarnessTask:
  """An agentic game (e.g. an ALFWorld game file) as a harness task; `text` is its goal."""
  return HarnessTask(task_id=task_id, suite=suite, text=text, family=family,
                     executor_task=ExecutorTask(env_task, max_tokens), agentic=True)
