"""The environment seam: what the agent loop, the env pool and every task suite agree on."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Env(Protocol):
  """A text environment stepped by the host-side agent loop.

  `task` is whatever identifies one episode's problem (a game folder, a task record).
  """

  def reset(self, task: Any) -> tuple[str, str]:
    """Starts an episode; returns (task_text, first_observation)."""

  def step(self, command: str) -> tuple[str, bool, bool, dict[str, Any]]:
    """Runs one environment action; returns (observation, done, won, info).

    `info` carries at least `changed_state: bool`, whether the action changed the world's state
    (used by the redundancy penalty). Invalid commands give the environment's own feedback as the
    observation; they never raise. It may carry `score`, the episode's partial credit so far in
    [0, 1] (1 once won).
    """

  def changes_state(self, command: str) -> bool:
    """Whether the most recent `step(command)` changed the world's state."""
