"""Packing samples into [k * rows, T]: layout, first-fit, as many minibatches as needed,
truncation, no cross-talk."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memex_jax.models.logprobs import sequence_logprobs
from memex_jax.rl import packing


def test_layout_positions_segment_ids_masks_and_advantages(make_sample):
  a = make_sample([5, 6, 7], [1, 0, 1], trajectory_id=10)
  b = make_sample([8, 9], [0, 1], trajectory_id=11, rollout_logprobs=[0.0, -1.25])
  c = make_sample([3, 4, 2, 1], [0, 0, 1, 1], trajectory_id=10, index=1)
  packed, stats = packing.pack_samples([a, b, c], {10: 0.5, 11: -2.0}, minibatch_rows=2,
                                          seq_len=6)
  np.testing.assert_array_equal(packed.tokens, [[5, 6, 7, 8, 9, 0], [3, 4, 2, 1, 0, 0]])
  np.testing.assert_array_equal(packed.positions, [[0, 1, 2, 0, 1, 0], [0, 1, 2, 3, 0, 0]])
  np.testing.assert_array_equal(packed.segment_ids, [[1, 1, 1, 2, 2, 0], [1, 1, 1, 1, 0, 0]])
  # A sample's first token has no prediction, so its mask is cleared even when set.
  np.testing.assert_array_equal(packed.loss_mask, [[0, 0, 1, 0, 1, 0], [0, 0, 1, 1, 0, 0]])
  # Every token of a sample carries its trajectory's advantage.
  np.testing.assert_array_equal(packed.advantages,
                                [[0.5, 0.5, 0.5, -2, -2, 0], [0.5, 0.5, 0.5, 0.5, 0, 0]])
  np.testing.assert_array_equal(packed.trajectory_ids,
                                [[10, 10, 10, 11, 11, -1], [10, 10, 10, 10, -1, -1]])
  np.testing.assert_array_equal(packed.rollout_logprobs[0, 3:5], [0.0, -1.25])
  assert not packed.old_logprobs.any() and not packed.ref_logprobs.any()
  assert packed.tokens.dtype == np.int32 and packed.loss_mask.dtype == np.float32
  assert (stats.num_packed, stats.rows_used, stats.loss_tokens) == (3, 2, 4)
  assert stats.num_minibatches == 1
  assert stats.fill == pytest.approx(9 / 12)


def test_a_supervised_sample_keeps_its_token_weights(make_sample):
  a = make_sample([5, 6, 7, 8], [0, 1, 4, 4], trajectory_id=0)
  packed, stats = packing.pack_samples([a], None, minibatch_rows=1, seq_len=5)
  np.testing.assert_array_equal(packed.loss_mask, [[0, 1, 4, 4, 0]])
  assert stats.loss_tokens == 3  # tokens, not weight

def test_first_fit_places_every_sample_in_as_many_minibatches_as_needed(make_sample):
  segs = [make_sample(np.arange(n) + 1, np.ones(n), trajectory_id=i)
          for i, n in enumerate([6, 6, 3, 2, 4])]
  packed, stats = packing.pack_samples(segs, None, minibatch_rows=2, seq_len=8)
  # 6 -> row 0, 6 -> row 1, 3 -> row 2, 2 -> row 0 (first fit), 4 -> row 2; 3 rows make two
  # minibatches of 2 rows, the last row padding.
  assert packed.shape == (4, 8) and stats.num_minibatches == 2 and stats.rows_used == 3
  np.testing.assert_array_equal(packed.trajectory_ids[0], [0] * 6 + [3] * 2)
  np.testing.assert_array_equal(packed.trajectory_ids[1], [1] * 6 + [-1] * 2)
  np.testing.assert_array_equal(packed.trajectory_ids[2], [2, 2, 2, 4, 4, 4, 4, -1])
  assert not packed.segment_ids[3].any()
  assert stats.num_packed == 5 and "num_leftover" not in stats.as_dict()
  assert not packed.advantages.any()  # no advantages given (SFT): all zero
  empty, stats = packing.pack_samples([], None, minibatch_rows=2, seq_len=8)
  assert empty.shape == (2, 8) and stats.num_minibatches == 1 and stats.num_packed == 0


def test_map_minibatches_sees_one_shape_and_reassembles_in_order(make_sample):
  segs = [make_sample(np.arange(7) + 1, np.ones(7), trajectory_id=i) for i in range(5)]
  packed, stats = packing.pack_samples(segs, {i: float(i) for i in range(5)}, 2, 8)
  shapes = []

  def double_advantages(minibatch):
    shapes.append(minibatch.shape)
    return minibatch.replace(advantages=2 * minibatch.advantages)

  mapped = packing.map_minibatches(double_advantages, packed, 2)
  assert shapes == [(2, 8)] * stats.num_minibatches == [(2, 8)] * 3
  np.testing.assert_array_equal(mapped.advantages, 2 * packed.advantages)
  np.testing.assert_array_equal(mapped.tokens, packed.tokens)
  with pytest.raises(ValueError, match="6 rows are not whole minibatches of 4"):
    packing.map_minibatches(double_advantages, packed, 4)


def test_overlong_sample_is_cut_to_its_prefix_and_counted(make_sample):
  long = make_sample(np.arange(1, 13), [0] * 3 + [1] * 9, trajectory_id=1)
  packed, stats = packing.pack_samples([long], {1: 1.0}, minibatch_rows=1, seq_len=8)
  np.testing.assert_array_equal(packed.tokens[0], np.arange(1, 9))
  np.testing.assert_array_equal(packed.positions[0], np.arange(8))
  assert (stats.num_truncated, stats.truncated_tokens, stats.truncated_loss_tokens) == (1, 4, 4)
  assert stats.num_packed == 1 and stats.loss_tokens == 5


def test_samples_of_filtered_trajectories_are_counted_not_packed(make_sample):
  segs = [make_sample([1, 2, 3], [0, 1, 1], trajectory_id=t) for t in (1, 2, 2)]
  packed, stats = packing.pack_samples(segs, {1: 1.0}, minibatch_rows=2, seq_len=4)
  assert stats.num_without_advantage == 2 and stats.num_packed == 1
  assert set(np.unique(packed.trajectory_ids)) == {-1, 1}


def test_bad_input_names_the_sample(make_sample):
  bad = make_sample([1, 2, 3], [0, 1, 1], trajectory_id=7, rollout_logprobs=[0.0, 0.0])
  with pytest.raises(ValueError, match="trajectory 7: rollout_logprobs has 2 entries"):
    packing.pack_samples([bad], None, minibatch_rows=1, seq_len=4)
  with pytest.raises(ValueError, match="no tokens"):
    packing.pack_samples([make_sample([], [], trajectory_id=3)], None, 1, 4)
  with pytest.raises(ValueError, match="seq_len"):
    packing.pack_samples([], None, minibatch_rows=1, seq_len=1)


def test_packed_batch_is_a_pytree_that_jit_accepts(make_sample):
  packed, _ = packing.pack_samples([make_sample([1, 2], [0, 1], 0)], {0: 1.0}, 2, 3)
  assert len(jax.tree.leaves(packed)) == 11  # with the PPO fields old_values and returns
  doubled = jax.jit(lambda b: b.replace(advantages=2 * b.advantages))(packed)
  assert isinstance(doubled, packing.PackedBatch) and doubled.shape == (2, 3)
  np.testing.assert_array_equal(doubled.advantages[0], [2.0, 2.0, 0.0])


def test_packed_forward_equals_separate_forwards(make_sample, tiny_model):
  cfg, params = tiny_model
  rng = np.random.default_rng(0)
  lengths = [5, 7, 4, 9]
  segs = [make_sample(rng.integers(1, cfg.vocab_size, n), np.ones(n), trajectory_id=i)
          for i, n in enumerate(lengths)]
  packed, stats = packing.pack_samples(segs, None, minibatch_rows=2, seq_len=16)
  assert stats.num_packed == 4 and stats.rows_used == 2
  logprobs = jax.jit(sequence_logprobs, static_argnums=0)
  logp = logprobs(cfg, params, jnp.asarray(packed.tokens), jnp.asarray(packed.positions),
                  jnp.asarray(packed.segment_ids))
  # Each sample alone in its own row, padded at the end (causal: padding after it is unseen).
  alone = np.zeros((len(segs), max(lengths)), np.int32)
  for i, seg in enumerate(segs):
    alone[i, :lengths[i]] = seg.token_ids
  positions = np.broadcast_to(np.arange(max(lengths)), alone.shape)
  alone_logp = np.asarray(logprobs(cfg, params, jnp.asarray(alone), jnp.asarray(positions)))
  for i, seg in enumerate(segs):
    where = packed.trajectory_ids == seg.trajectory_id
    np.testing.assert_allclose(np.asarray(logp)[where], alone_logp[i, :lengths[i]], atol=2e-5)
