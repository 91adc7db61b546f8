"""What the learner trains on: one self-contained token sequence and the reward it earned.

The agent loop makes one `Sample` per segment of a trajectory (the context between two
compressions); the copilot learner makes one per completion. Nothing here knows an agent.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Sample:
  """One trainable sequence.

  Attributes:
    token_ids: [T] int32, the exact ids the policy saw and sampled.
    loss_mask: [T] int32, 1 on tokens the policy sampled (the trained tokens), else 0; a
      supervised sample may give some tokens a larger weight in the SFT loss (e.g. the turns
      that compress, `demos.dataset.iter_sft_examples`).
    rollout_logprobs: [T] float32, the sampler's logprob of each sampled token, 0 elsewhere.
    trajectory_id: the episode (or completion) it belongs to; advantages are per trajectory.
    group_id: the prompt group (GRPO normalises rewards within a group).
    reward: the trajectory's scalar return, shared by all its samples.
    index: position among its trajectory's samples (0 for single-sample trajectories).
  """

  token_ids: np.ndarray
  loss_mask: np.ndarray
  rollout_logprobs: np.ndarray
  trajectory_id: int
  group_id: int
  reward: float
  index: int = 0

  @property
  def name(self) -> str:
    """How errors and logs name it."""
    return f"sample {self.index} of trajectory {self.trajectory_id}"

  def check(self) -> None:
    """Raises ValueError, naming the sample, when it has no tokens or ragged fields."""
    n = len(self.token_ids)
    if n == 0:
      raise ValueError(f"{self.name} has no tokens")
    for field in ("loss_mask", "rollout_logprobs"):
      if len(getattr(self, field)) != n:
        raise ValueError(f"{self.name}: {field} has {len(getattr(self, field))} entries for "
                         f"{n} token_ids")


def trained_runs(loss_mask: np.ndarray) -> list[np.ndarray]:
  """The positions of each run of trained tokens in `loss_mask` [T], in order: one per sampled
  turn of a segment (its tool replies, never trained, separate them)."""
  trained = np.flatnonzero(loss_mask)
  return np.split(trained, np.flatnonzero(np.diff(trained) > 1) + 1) if trained.size else []


def supervised_samples(examples) -> list[Sample]:
  """Samples of supervised examples ((token_ids, loss_mask) pairs): no rollout logprobs, no
  reward, one trajectory each, numbered in order."""
  return [Sample(token_ids=np.asarray(ids, np.int32), loss_mask=np.asarray(mask, np.int32),
                 rollout_logprobs=np.zeros(len(ids), np.float32), trajectory_id=i, group_id=0,
                 reward=0.0)
          for i, (ids, mask) in enumerate(examples)]
