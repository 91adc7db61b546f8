"""The learner's sample type: checks that name the sample, supervised examples as samples."""

import numpy as np
import pytest

from memex_jax.rl import sample as sample_lib


def test_ragged_or_empty_samples_are_named():
  good = sample_lib.Sample(np.arange(3), np.ones(3), np.zeros(3), trajectory_id=4, group_id=1,
                           reward=0.5, index=2)
  good.check()
  with pytest.raises(ValueError, match="sample 2 of trajectory 4: loss_mask has 2 entries"):
    sample_lib.Sample(np.arange(3), np.ones(2), np.zeros(3), 4, 1, 0.5, 2).check()
  with pytest.raises(ValueError, match="sample 0 of trajectory 9 has no tokens"):
    sample_lib.Sample(np.arange(0), np.ones(0), np.zeros(0), 9, 0, 0.0).check()


def test_supervised_examples_become_one_trajectory_each():
  samples = sample_lib.supervised_samples([([5, 6, 7], [0, 1, 1]), ([8, 9], [1, 1])])
  assert [s.trajectory_id for s in samples] == [0, 1]
  assert all(s.reward == 0.0 and s.group_id == 0 for s in samples)
  np.testing.assert_array_equal(samples[0].loss_mask, [0, 1, 1])
  assert samples[1].token_ids.dtype == np.int32 and not samples[1].rollout_logprobs.any()


def test_trained_runs_are_the_positions_of_each_turn():
  runs = sample_lib.trained_runs(np.array([0, 1, 1, 0, 0, 4, 4, 4, 0, 1], np.int32))
  assert [r.tolist() for r in runs] == [[1, 2], [5, 6, 7], [9]]
  assert sample_lib.trained_runs(np.zeros(3, np.int32)) == []
