"""Advantage estimators over trajectories, by name.

Advantages are computed per trajectory, never per sample: a trajectory that compressed k
times has k + 1 samples (segments), and counting each would weight it k + 1 times in its
group's mean and std. Every sample then inherits its trajectory's advantage (see
`pack_samples`).
"""

from __future__ import annotations

import collections
import dataclasses
import inspect
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from memex_jax.rl.sample import Sample

# Rewards closer than this count as equal when deciding that a group carries no signal.
_TIE_ATOL = 1e-9


@dataclasses.dataclass(frozen=True)
class AdvantageResult:
  """Advantages of the kept trajectories, and what the estimator kept.

  Attributes:
    advantages: trajectory id -> advantage, only for trajectories of kept groups.
    num_groups: groups seen.
    groups_kept: groups whose trajectories got an advantage.
    groups_dropped: groups dropped because all their rewards matched (no signal).
    trajectories_kept: trajectories with an advantage.
    trajectories_dropped: trajectories of dropped groups.
  """

  advantages: dict[int, float]
  num_groups: int
  groups_kept: int
  groups_dropped: int
  trajectories_kept: int
  trajectories_dropped: int

  @property
  def skip_step(self) -> bool:
    """True when no trajectory carries signal: the caller skips the update and counts it."""
    return not self.advantages

  def as_dict(self) -> dict[str, float]:
    """The counters, for metrics."""
    out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
           if f.name != "advantages"}
    out["skip_step"] = int(self.skip_step)
    return out


def trajectory_rewards(samples: Sequence[Sample]) -> tuple[dict[int, float], dict[int, int]]:
  """(trajectory id -> reward, trajectory id -> group id) from samples.

  Raises:
    ValueError: samples of one trajectory disagree on its reward or group.
  """
  rewards: dict[int, float] = {}
  groups: dict[int, int] = {}
  for s in samples:
    tid = s.trajectory_id
    if tid in rewards and (rewards[tid] != s.reward or groups[tid] != s.group_id):
      raise ValueError(
          f"samples of trajectory {tid} disagree: reward {rewards[tid]} vs {s.reward}, "
          f"group {groups[tid]} vs {s.group_id}")
    rewards[tid], groups[tid] = float(s.reward), int(s.group_id)
  return rewards, groups


def grpo(rewards: Mapping[int, float], group_ids: Mapping[int, int], *, eps: float = 1e-6,
         drop_uniform_groups: bool = True) -> AdvantageResult:
  """Group-relative advantages, Memex Eq. 2: (R - mean) / (std + eps) within each group.

  Args:
    rewards: trajectory id -> scalar return R.
    group_ids: trajectory id -> prompt group; every id in `rewards` needs one.
    eps: keeps the division finite in groups of near-equal rewards.
    drop_uniform_groups: leave out groups whose rewards all match (their advantages would all
      be 0, so they add only noise to the normalisation and cost compute).

  Returns:
    the advantages (population std over the G trajectories of a group) and counters.
  """
  missing = sorted(set(rewards) - set(group_ids))
  if missing:
    raise ValueError(f"grpo: trajectories {missing[:5]} have a reward but no group id")
  members: dict[int, list[int]] = collections.defaultdict(list)
  for tid in rewards:
    members[group_ids[tid]].append(tid)
  advantages: dict[int, float] = {}
  dropped = dropped_trajectories = 0
  for tids in members.values():
    r = np.asarray([rewards[t] for t in tids], np.float64)  # G
    if drop_uniform_groups and np.ptp(r) <= _TIE_ATOL:
      dropped += 1
      dropped_trajectories += len(tids)
      continue
    a = (r - r.mean()) / (r.std() + eps)
    advantages.update({t: float(v) for t, v in zip(tids, a)})
  return AdvantageResult(
      advantages=advantages, num_groups=len(members), groups_kept=len(members) - dropped,
      groups_dropped=dropped, trajectories_kept=len(advantages),
      trajectories_dropped=dropped_trajectories)


AdvantageFn = Callable[..., AdvantageResult]
ADVANTAGE_ESTIMATORS: dict[str, AdvantageFn] = {"grpo": grpo}


def advantage_fn(name: str, **options: Any) -> Callable[[Sequence[Sample]], AdvantageResult]:
  """samples -> AdvantageResult of the estimator `name` with `options` bound.

  Unknown names and options fail here, when a run starts, not after its first rollouts.
  """
  estimator = checked_estimator(ADVANTAGE_ESTIMATORS, "advantage estimator", name, options,
                                num_inputs=2)
  return lambda samples: estimator(*trajectory_rewards(samples), **options)


def checked_estimator(registry: Mapping[str, Callable[..., Any]], what: str, name: str,
                      options: Mapping[str, Any], num_inputs: int) -> Callable[..., Any]:
  """registry[name], once its `num_inputs` positional inputs and `options` are known to bind:
  an unknown name or option is a ValueError naming `what` when the run starts."""
  if name not in registry:
    raise ValueError(f"unknown {what} {name!r}; expected one of {sorted(registry)}")
  estimator = registry[name]
  try:
    inspect.signature(estimator).bind(*([None] * num_inputs), **options)
  except TypeError as e:
    raise ValueError(f"{what} {name!r}: {e}") from None
  return estimator


def estimate_advantages(name: str, samples: Sequence[Sample], **options: Any) -> AdvantageResult:
  """Runs the estimator `name` on the trajectories behind `samples`."""
  return advantage_fn(name, **options)(samples)
