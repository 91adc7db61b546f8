"""GRPO advantages per trajectory, group filtering and the skip signal."""

import math

import pytest

from memex_jax.rl import advantages as adv_lib


def test_grpo_matches_hand_computed_values():
  rewards = {1: 1.0, 2: 0.0, 3: 0.0, 4: 1.0, 5: 0.5, 6: 0.5, 7: 1.0, 8: 0.0, 9: -0.5}
  groups = {1: 0, 2: 0, 3: 0, 4: 0, 5: 1, 6: 1, 7: 2, 8: 2, 9: 2}
  result = adv_lib.grpo(rewards, groups, eps=1e-6)
  # Group 0: mean 0.5, population std 0.5.
  for tid, sign in ((1, 1), (2, -1), (3, -1), (4, 1)):
    assert result.advantages[tid] == pytest.approx(sign * 0.5 / (0.5 + 1e-6))
  # Group 1 has identical rewards: no signal, dropped.
  assert 5 not in result.advantages and 6 not in result.advantages
  # Group 2: mean 1/6, deviations 5/6, -1/6, -4/6, variance (25 + 1 + 16) / 36 / 3.
  std = math.sqrt(42 / 108)
  assert result.advantages[7] == pytest.approx((5 / 6) / (std + 1e-6))
  assert result.advantages[8] == pytest.approx((-1 / 6) / (std + 1e-6))
  assert result.advantages[9] == pytest.approx((-4 / 6) / (std + 1e-6))
  assert (result.num_groups, result.groups_kept, result.groups_dropped) == (3, 2, 1)
  assert (result.trajectories_kept, result.trajectories_dropped) == (7, 2)
  assert not result.skip_step and result.as_dict()["skip_step"] == 0


def test_uniform_groups_kept_with_zero_advantage_when_not_dropping():
  result = adv_lib.grpo({1: 0.5, 2: 0.5}, {1: 0, 2: 0}, drop_uniform_groups=False)
  assert result.advantages == {1: 0.0, 2: 0.0} and result.groups_dropped == 0


def test_all_groups_without_signal_ask_to_skip_the_step():
  result = adv_lib.grpo({1: 1.0, 2: 1.0, 3: 0.0}, {1: 0, 2: 0, 3: 1})
  assert result.skip_step and result.advantages == {}
  assert result.as_dict() == {"num_groups": 2, "groups_kept": 0, "groups_dropped": 2,
                              "trajectories_kept": 0, "trajectories_dropped": 3,
                              "skip_step": 1}


def test_many_samples_do_not_skew_the_group(make_sample):
  # Trajectory 1 compressed four times (5 samples), trajectory 2 never did (1 sample).
  segs = [make_sample([1, 2], [0, 1], trajectory_id=1, index=i, reward=1.0)
          for i in range(5)]
  segs.append(make_sample([1, 2], [0, 1], trajectory_id=2, reward=0.0))
  result = adv_lib.estimate_advantages("grpo", segs, eps=0.0)
  # Over trajectories: mean 0.5, std 0.5 -> +-1. Over samples it would be mean 5/6.
  assert result.advantages == {1: pytest.approx(1.0), 2: pytest.approx(-1.0)}


def test_inconsistent_or_unknown_input_is_rejected(make_sample):
  segs = [make_sample([1, 2], [0, 1], trajectory_id=1, reward=1.0),
          make_sample([1, 2], [0, 1], trajectory_id=1, index=1, reward=0.0)]
  with pytest.raises(ValueError, match="trajectory 1 disagree"):
    adv_lib.trajectory_rewards(segs)
  with pytest.raises(ValueError, match="unknown advantage estimator 'gae'"):
    adv_lib.estimate_advantages("gae", segs[:1])
  with pytest.raises(ValueError, match="'grpo': got an unexpected keyword argument 'drop'"):
    adv_lib.advantage_fn("grpo", drop=True)  # refused before any rollout
  with pytest.raises(ValueError, match="no group id"):
    adv_lib.grpo({1: 1.0, 2: 0.0}, {1: 0})
