"""Each term of the MemexRL loss and each normalisation against hand-computed values."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memex_jax.rl.packing import PackedBatch
from memex_jax.rl.losses import NORMALISATIONS, LossConfig, policy_loss, sft_loss

LOG = math.log
PLAIN = dict(tis_cap=None, kl_coef=0.0)  # only the clipped surrogate


def make_batch(advantages, mask=None, old=None, rollout=None, ref=None, segment_ids=None,
               trajectory_ids=None) -> PackedBatch:
  a = jnp.asarray(advantages, jnp.float32)
  a = a.reshape(1, -1) if a.ndim == 1 else a
  zeros = jnp.zeros_like(a)
  arr = lambda x, default, dt=jnp.float32: default if x is None else jnp.asarray(
      x, dt).reshape(a.shape)
  return PackedBatch(
      tokens=zeros.astype(jnp.int32), positions=zeros.astype(jnp.int32),
      segment_ids=arr(segment_ids, jnp.ones_like(a, jnp.int32), jnp.int32),
      loss_mask=arr(mask, jnp.ones_like(a)), rollout_logprobs=arr(rollout, zeros),
      old_logprobs=arr(old, zeros), ref_logprobs=arr(ref, zeros), advantages=a,
      trajectory_ids=arr(trajectory_ids, zeros.astype(jnp.int32), jnp.int32))


def test_clip_low_and_high_bind_only_on_the_side_that_matters():
  # ratio 1.5 and 0.5 against advantages +1 and -1.
  logp = jnp.asarray([[LOG(1.5), LOG(1.5), LOG(0.5), LOG(0.5)]])
  batch = make_batch([1.0, -1.0, -1.0, 1.0])
  config = LossConfig(clip_low=0.2, clip_high=0.28, **PLAIN)
  loss, metrics = policy_loss(logp, batch, config)
  # A=+1, r=1.5: clipped to 1.28. A=-1, r=1.5: 1.5 (pessimistic). A=-1, r=0.5: clipped to
  # 0.8. A=+1, r=0.5: -0.5.
  expected = [-1.28, 1.5, 0.8, -0.5]
  assert loss == pytest.approx(np.mean(expected), rel=1e-6)
  assert metrics["clip_frac_high"] == pytest.approx(0.25)
  assert metrics["clip_frac_low"] == pytest.approx(0.25)
  assert metrics["ratio_mean"] == pytest.approx(1.0)
  grad = jax.grad(lambda lp: policy_loss(lp, batch, config)[0])(logp)
  # Clipped tokens get no gradient; the others -A * r / N.
  np.testing.assert_allclose(grad, [[0.0, 1.5 / 4, 0.0, -0.5 / 4]], rtol=1e-6)


def test_truncated_importance_weight_is_capped_and_not_differentiated():
  old = jnp.asarray([[LOG(0.3), LOG(0.3), LOG(0.6)]])
  rollout = jnp.asarray([[LOG(0.1), LOG(0.2), LOG(0.6)]])  # pi_old / pi_rollout = 3, 1.5, 1
  logp = old  # ratio 1
  batch = make_batch([1.0, 1.0, 1.0], old=old, rollout=rollout)
  config = LossConfig(tis_cap=2.0, kl_coef=0.0)
  loss, metrics = policy_loss(logp, batch, config)
  assert loss == pytest.approx(-(2.0 + 1.5 + 1.0) / 3, rel=1e-6)
  assert metrics["tis_weight_mean"] == pytest.approx(4.5 / 3, rel=1e-6)
  assert metrics["tis_capped_frac"] == pytest.approx(1 / 3)
  grad = jax.grad(lambda lp: policy_loss(lp, batch, config)[0])(logp)
  np.testing.assert_allclose(grad, [[-2.0 / 3, -1.5 / 3, -1.0 / 3]], rtol=1e-6)
  unweighted, _ = policy_loss(logp, batch, LossConfig(**PLAIN))
  assert unweighted == pytest.approx(-1.0, rel=1e-6)


def test_k3_kl_to_the_reference():
  logp = jnp.asarray([[LOG(0.25), LOG(0.5), LOG(0.4)]])
  ref = jnp.asarray([[LOG(0.5), LOG(0.25), LOG(0.4)]])  # ref - logp = ln 2, -ln 2, 0
  batch = make_batch([0.0, 0.0, 0.0], old=logp, ref=ref)
  config = LossConfig(tis_cap=None, kl_coef=0.5)
  loss, metrics = policy_loss(logp, batch, config)
  k3 = [2 - LOG(2) - 1, 0.5 + LOG(2) - 1, 0.0]
  assert metrics["kl"] == pytest.approx(np.mean(k3), rel=1e-6)
  assert loss == pytest.approx(0.5 * np.mean(k3), rel=1e-6)
  grad = jax.grad(lambda lp: policy_loss(lp, batch, config)[0])(logp)
  # d/dlogp of exp(ref - logp) - (ref - logp) - 1 is 1 - exp(ref - logp).
  np.testing.assert_allclose(grad, [[0.5 * (1 - 2) / 3, 0.5 * (1 - 0.5) / 3, 0.0]], rtol=1e-5)
  assert "kl" not in policy_loss(logp, batch, LossConfig(**PLAIN))[1]


def test_entropy_bonus_is_subtracted():
  batch = make_batch([0.0, 0.0, 0.0], mask=[1, 1, 0])
  entropy = jnp.asarray([[2.0, 1.0, 100.0]])
  config = LossConfig(entropy_coef=0.1, **PLAIN)
  loss, metrics = policy_loss(jnp.zeros((1, 3)), batch, config, entropy=entropy)
  assert loss == pytest.approx(-0.1 * 1.5, rel=1e-6)
  assert metrics["entropy"] == pytest.approx(1.5)
  with pytest.raises(ValueError, match="entropy"):
    policy_loss(jnp.zeros((1, 3)), batch, config)


def normalisation_batch():
  """Per-token loss -A (ratio 1): row 0 holds trajectory 1 (segment 1, 3 trained tokens) and
  trajectory 2 (segment 2, 1 token); row 1 holds trajectory 2 (segment 1, 2 tokens) + padding."""
  return make_batch(
      advantages=[[1.0, 1.0, 1.0, -2.0], [-2.0, -2.0, 0.0, 0.0]],
      mask=[[1, 1, 1, 1], [1, 1, 0, 0]],
      segment_ids=[[1, 1, 1, 2], [1, 1, 0, 0]],
      trajectory_ids=[[1, 1, 1, 2], [2, 2, -1, -1]])


@pytest.mark.parametrize("name, expected", [
    ("token_mean", (-3 + 2 + 4) / 6),  # 3 tokens at -1, 3 tokens at +2
    ("sequence_mean", (-1 + 2 + 2) / 3),  # segments: mean -1, 2, 2
    ("trajectory_mean", (-1 + 2) / 2),  # trajectories: mean -1, 2
])
def test_each_normalisation(name, expected):
  batch = normalisation_batch()
  config = LossConfig(normalisation=name, **PLAIN)
  loss, _ = jax.jit(policy_loss, static_argnums=2)(jnp.zeros((2, 4)), batch, config)
  assert loss == pytest.approx(expected, rel=1e-6)
  weights = NORMALISATIONS[name](batch)
  assert float(jnp.sum(weights)) == pytest.approx(1.0)
  assert not np.asarray(weights)[1, 2:].any()


def test_token_mean_weights_long_trajectories_more():
  # A long winner (6 trained tokens, A = +1) and a short loser (2 tokens, A = -1).
  batch = make_batch([1.0] * 6 + [-1.0] * 2, trajectory_ids=[1] * 6 + [2] * 2,
                     segment_ids=[1] * 6 + [2] * 2)
  logp = jnp.zeros((1, 8))
  token, _ = policy_loss(logp, batch, LossConfig(normalisation="token_mean", **PLAIN))
  per_traj, _ = policy_loss(logp, batch, LossConfig(normalisation="trajectory_mean", **PLAIN))
  assert token == pytest.approx((-6 + 2) / 8)  # the long trajectory dominates
  assert per_traj == pytest.approx(0.0, abs=1e-7)  # each trajectory counts once


def test_garbage_on_untrained_tokens_never_reaches_loss_or_gradient():
  batch = make_batch([1.0, jnp.inf], mask=[1, 0], old=[0.0, -1e4], rollout=[0.0, -1e4],
                     ref=[0.0, 1e4])
  logp = jnp.asarray([[0.0, 50.0]])
  config = LossConfig()
  loss, grad = jax.value_and_grad(lambda lp: policy_loss(lp, batch, config)[0])(logp)
  assert np.isfinite(loss) and np.isfinite(grad).all() and grad[0, 1] == 0.0


def test_sft_loss_is_mean_nll_on_trained_tokens():
  batch = make_batch([0.0, 0.0, 0.0], mask=[0, 1, 1])
  loss, metrics = sft_loss(jnp.asarray([[-9.0, -1.0, -3.0]]), batch)
  assert loss == pytest.approx(2.0) and metrics["loss_tokens"] == 2


def test_sft_loss_weighs_tokens_by_their_mask_and_ignores_untrained_garbage():
  batch = make_batch([0.0, 0.0, 0.0, 0.0], mask=[0, 1, 2, 0])
  loss, metrics = sft_loss(jnp.asarray([[-9.0, -1.0, -3.0, jnp.nan]]), batch)
  assert loss == pytest.approx((1.0 + 2 * 3.0) / 3) and metrics["loss_tokens"] == 2

def test_bad_config_is_rejected():
  with pytest.raises(ValueError, match="normalisation='per_token'"):
    LossConfig(normalisation="per_token")
  with pytest.raises(ValueError, match="clip_low"):
    LossConfig(clip_low=1.0)
  with pytest.raises(ValueError, match="tis_cap"):
    LossConfig(tis_cap=0.0)
