"""MemexRL policy loss (PPO clip-higher + truncated importance sampling + k3 KL) and SFT loss.

All functions are pure and jittable; they take per-token logprobs [B T] of the policy being
trained plus a PackedBatch, and return (scalar loss, metrics dict of scalars).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp

from memex_jax.rl.packing import PackedBatch

Array = jax.Array


def _group_mean_weights(mask: Array, keys: Array, num_keys: int) -> Array:
  """Token weights [B T] for a mean within each key group, then over the groups with tokens."""
  flat_mask, flat_keys = mask.reshape(-1), keys.reshape(-1)
  counts = jax.ops.segment_sum(flat_mask, flat_keys, num_segments=num_keys)  # K
  num_groups = jnp.sum(counts > 0)
  weights = flat_mask / jnp.maximum(counts[flat_keys], 1.0) / jnp.maximum(num_groups, 1)
  return weights.reshape(mask.shape)


def token_mean_weights(batch: PackedBatch) -> Array:
  """Every trained token counts the same: long segments and trajectories weigh more."""
  mask = batch.loss_mask
  return mask / jnp.maximum(jnp.sum(mask), 1.0)


def sequence_mean_weights(batch: PackedBatch) -> Array:
  """Mean over the tokens of each packed sample, then over samples."""
  b, t = batch.loss_mask.shape
  keys = jnp.arange(b)[:, None] * (t + 1) + batch.segment_ids  # B T, unique per (row, segment)
  return _group_mean_weights(batch.loss_mask, keys, b * (t + 1))


def trajectory_mean_weights(batch: PackedBatch) -> Array:
  """Mean over the tokens of each trajectory (all its samples in the batch), then over them."""
  ids = batch.trajectory_ids.reshape(-1)
  _, keys = jnp.unique(ids, size=ids.size, fill_value=-1, return_inverse=True)
  return _group_mean_weights(batch.loss_mask, keys.reshape(batch.loss_mask.shape), ids.size)


# Name -> batch -> token weights [B T] that sum to 1 over the trained tokens (0 if none).
NORMALISATIONS: dict[str, Callable[[PackedBatch], Array]] = {
    "token_mean": token_mean_weights,
    "sequence_mean": sequence_mean_weights,
    "trajectory_mean": trajectory_mean_weights,
}


@dataclasses.dataclass(frozen=True)
class LossConfig:
  """Knobs of the MemexRL policy loss (hashable, so it can be a static jit argument).

  Attributes:
    clip_low: the ratio is clipped below at 1 - clip_low.
    clip_high: and above at 1 + clip_high (clip-higher: > clip_low keeps exploration alive).
    tis_cap: cap of the truncated importance-sampling weight
      min(tis_cap, pi_old / pi_rollout) that corrects for the sampler/learner mismatch;
      None turns the correction off.
    kl_coef: weight of the k3 KL estimate to the frozen reference; 0 skips it (and the
      reference logprobs are then never read).
    entropy_coef: weight of the entropy bonus (subtracted from the loss).
    normalisation: how token terms are averaged, a key of NORMALISATIONS.
    temperature: the sampler's temperature; the learner's logprobs use the same one.
    logit_chunk: tokens per chunk when forming logits (memory vs speed).
  """

  clip_low: float = 0.2
  clip_high: float = 0.28
  tis_cap: float | None = 2.0
  kl_coef: float = 0.001
  entropy_coef: float = 0.0
  normalisation: str = "token_mean"
  temperature: float = 1.0
  logit_chunk: int = 512

  def __post_init__(self):
    if self.normalisation not in NORMALISATIONS:
      raise ValueError(f"LossConfig.normalisation={self.normalisation!r}; expected one of "
                       f"{sorted(NORMALISATIONS)}")
    if self.clip_low < 0 or self.clip_low >= 1 or self.clip_high < 0:
      raise ValueError(f"LossConfig: need 0 <= clip_low < 1 and clip_high >= 0, got "
                       f"clip_low={self.clip_low}, clip_high={self.clip_high}")
    if self.tis_cap is not None and self.tis_cap <= 0:
      raise ValueError(f"LossConfig.tis_cap={self.tis_cap} must be positive or None")
    if self.temperature <= 0:
      raise ValueError(f"LossConfig.temperature={self.temperature} must be positive")


def _masked_mean(x: Array, mask: Array) -> Array:
  return jnp.sum(jnp.where(mask, x, 0.0)) / jnp.maximum(jnp.sum(mask), 1)


def policy_loss(logprobs: Array, batch: PackedBatch, config: LossConfig,
                entropy: Array | None = None) -> tuple[Array, dict[str, Array]]:
  """The MemexRL objective to minimise.

  Per trained token: tis * max(-A r, -A clip(r, 1 - clip_low, 1 + clip_high))
  + kl_coef * (exp(ref - logp) - (ref - logp) - 1) - entropy_coef * H, with
  r = exp(logp - old) and tis = stop_gradient(min(tis_cap, exp(old - rollout))); the terms
  are then averaged with the `config.normalisation` weights.

  Args:
    logprobs: [B T] logprobs of batch.tokens under the policy being trained.
    batch: the packed batch with old (and, when kl_coef > 0, reference) logprobs filled.
    config: the loss knobs.
    entropy: [B T] policy entropy per position; required when entropy_coef > 0.

  Returns:
    (loss, metrics): clip fractions (where the low / high clip binds), mean ratio, KL,
    TIS weight mean and capped fraction, entropy, policy-gradient loss, trained tokens.
  """
  if config.entropy_coef and entropy is None:
    raise ValueError("policy_loss: entropy_coef > 0 needs the entropy array")
  mask = batch.loss_mask > 0
  # Masked tokens are replaced by neutral values before any exp, so padding or stale numbers
  # there can never produce inf/NaN (whose gradient would leak through jnp.where).
  advantages = jnp.where(mask, batch.advantages, 0.0)
  ratio = jnp.exp(jnp.where(mask, logprobs - batch.old_logprobs, 0.0))
  clipped = jnp.clip(ratio, 1.0 - config.clip_low, 1.0 + config.clip_high)
  surrogate = jnp.maximum(-advantages * ratio, -advantages * clipped)
  metrics = {
      "ratio_mean": _masked_mean(ratio, mask),
      "clip_frac_low": _masked_mean((ratio < 1.0 - config.clip_low) & (advantages < 0), mask),
      "clip_frac_high": _masked_mean((ratio > 1.0 + config.clip_high) & (advantages > 0), mask),
      "advantage_mean": _masked_mean(advantages, mask),
      "loss_tokens": jnp.sum(mask).astype(jnp.float32),
  }
  if config.tis_cap is not None:
    raw = jnp.exp(jnp.where(mask, batch.old_logprobs - batch.rollout_logprobs, 0.0))
    tis = jax.lax.stop_gradient(jnp.minimum(config.tis_cap, raw))
    surrogate = tis * surrogate
    metrics["tis_weight_mean"] = _masked_mean(tis, mask)
    metrics["tis_capped_frac"] = _masked_mean(raw > config.tis_cap, mask)
  weights = NORMALISATIONS[config.normalisation](batch)
  per_token = surrogate
  metrics["pg_loss"] = jnp.sum(weights * surrogate)
  if config.kl_coef:
    log_ref_ratio = jnp.where(mask, batch.ref_logprobs - logprobs, 0.0)
    kl = jnp.exp(log_ref_ratio) - log_ref_ratio - 1.0
    per_token = per_token + config.kl_coef * kl
    metrics["kl"] = _masked_mean(kl, mask)
  if entropy is not None:
    metrics["entropy"] = _masked_mean(entropy, mask)
    if config.entropy_coef:
      per_token = per_token - config.entropy_coef * jnp.where(mask, entropy, 0.0)
  loss = jnp.sum(weights * per_token)
  metrics["loss"] = loss
  return loss, metrics


@dataclasses.dataclass(frozen=True)
class ValueLossConfig:
  """The critic's loss (hashable: a static jit argument).

  Attributes:
    clip: a new value may move at most this far from the old one before the clipped term binds
      (PPO's value clipping); None disables it.
    coef: weight of the value loss beside the policy loss.
  """

  clip: float | None = 0.2
  coef: float = 0.5

  def __post_init__(self):
    if (self.clip is not None and self.clip <= 0) or self.coef < 0:
      raise ValueError(f"ValueLossConfig needs clip > 0 (or None) and coef >= 0: {self}")


def value_loss(values: Array, batch: PackedBatch,
               config: ValueLossConfig) -> tuple[Array, dict[str, Array]]:
  """PPO's clipped value loss, a mean over the trained tokens.

  Per token: 0.5 * max((V - R)^2, (V_old + clip(V - V_old, -c, c) - R)^2) with R the returns.

  Args:
    values: [B T] the critic's values under the params being trained.
    batch: with old_values and returns filled.
    config: the clip and the coefficient (the coefficient is applied by the caller).

  Returns:
    (loss, {'value_loss', 'value_clip_frac', 'value_mean', 'return_mean'}).
  """
  mask = batch.loss_mask > 0
  returns = jnp.where(mask, batch.returns, 0.0)
  values = jnp.where(mask, values, 0.0)
  squared = jnp.square(values - returns)
  clip_frac = jnp.zeros(())
  if config.clip is not None:
    old = jnp.where(mask, batch.old_values, 0.0)
    clipped = old + jnp.clip(values - old, -config.clip, config.clip)
    clipped_squared = jnp.square(clipped - returns)
    clip_frac = _masked_mean(clipped_squared > squared, mask)
    squared = jnp.maximum(squared, clipped_squared)
  loss = 0.5 * _masked_mean(squared, mask)
  return loss, {"value_loss": loss, "value_clip_frac": clip_frac,
                "value_mean": _masked_mean(values, mask),
                "return_mean": _masked_mean(returns, mask)}


def sft_loss(logprobs: Array, batch: PackedBatch) -> tuple[Array, dict[str, Array]]:
  """Negative log-likelihood over the trained tokens (assistant turns of demonstrations),
  averaged with the loss mask's weights (all 1 unless some turns are weighted more).

  Args:
    logprobs: [B T] logprobs of batch.tokens under the model being trained.
    batch: the packed demonstrations.

  Returns:
    (loss, {'loss', 'loss_tokens'}).
  """
  weights = batch.loss_mask
  # where, not a product: whatever stands on untrained tokens never reaches the loss.
  loss = -jnp.sum(jnp.where(weights > 0, weights * logprobs, 0.0)) / jnp.maximum(
      jnp.sum(weights), 1.0)
  return loss, {"loss": loss, "loss_tokens": jnp.sum(weights > 0).astype(jnp.float32)}
