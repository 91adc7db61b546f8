"""Reward shaping (Eq. 1): R = R_task - P_context - P_redundancy - P_format.

P_context = min(1, sum_t max(0, C_t - tau) / (tau T)), C_t the working context of step t,
  steps where a compression fired contributing nothing; T counts every step.
P_redundancy = N_redundant / N_tool_calls: a call is redundant when an identical (tool,
  arguments) call ran before and the state has not changed since that call began (a previous
  call that itself changed the state makes the repeat new work: walking east twice is
  progress); memory tools are neither counted nor tracked.
P_format = N_malformed / N_attempts, every assistant turn being an attempt.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence


@dataclasses.dataclass(frozen=True)
class RewardWeights:
  """Multipliers of the three penalties (each penalty itself lies in [0, 1])."""

  context: float = 1.0
  redundancy: float = 1.0
  format: float = 1.0


@dataclasses.dataclass(frozen=True)
class StepRecord:
  """What reward shaping needs from one agent step.

  Attributes:
    working_tokens: C_t, the working-context tokens the ContextStatus before the turn reported.
    compressed: a CompressExperience succeeded at this step.
    malformed: the turn had no well-formed tool call.
    tool_call: a well-formed call to a non-memory tool (environment, Finish, unknown names).
    redundant: that call repeated an earlier identical one with no state change since.
  """

  working_tokens: int
  compressed: bool = False
  malformed: bool = False
  tool_call: bool = False
  redundant: bool = False


@dataclasses.dataclass(frozen=True)
class RewardBreakdown:
  """Eq. 1 term by term (penalties unweighted, `total` weighted)."""

  task: float
  context: float
  redundancy: float
  format: float
  total: float
  num_redundant: int
  num_malformed: int
  num_tool_calls: int
  num_attempts: int


class RedundancyTracker:
  """Flags calls that repeat an identical call with no state change in between."""

  def __init__(self) -> None:
    self._last_call: dict[str, int] = {}
    self._last_change = -1
    self._count = 0

  def record(self, signature: str, changed_state: bool) -> bool:
    """Registers a non-memory call (in order); returns whether it was redundant."""
    previous = self._last_call.get(signature)
    redundant = previous is not None and self._last_change < previous
    self._last_call[signature] = self._count
    if changed_state:
      self._last_change = self._count
    self._count += 1
    return redundant


def context_penalty(steps: Sequence[StepRecord], threshold: int) -> float:
  if not steps:
    return 0.0
  overflow = sum(max(0, s.working_tokens - threshold) for s in steps if not s.compressed)
  return min(1.0, overflow / (threshold * len(steps)))


def shaped_reward(task_reward: float, steps: Sequence[StepRecord], threshold: int,
                  weights: RewardWeights = RewardWeights()) -> RewardBreakdown:
  """Eq. 1 for one trajectory.

  Args:
    task_reward: R_task (1.0 for success, 0.0 otherwise).
    steps: one record per agent step, in order.
    threshold: tau, the working-context budget in tokens.
    weights: penalty multipliers.
  """
  if threshold <= 0:
    raise ValueError(f"threshold must be positive, got {threshold}")
  num_tool_calls = sum(s.tool_call for s in steps)
  num_redundant = sum(s.redundant for s in steps)
  num_malformed = sum(s.malformed for s in steps)
  p_context = context_penalty(steps, threshold)
  p_redundancy = num_redundant / num_tool_calls if num_tool_calls else 0.0
  p_format = num_malformed / len(steps) if steps else 0.0
  total = (task_reward - weights.context * p_context - weights.redundancy * p_redundancy -
           weights.format * p_format)
  return RewardBreakdown(task_reward, p_context, p_redundancy, p_format, total, num_redundant,
                         num_malformed, num_tool_calls, len(steps))
