"""PPO with a value head: the critic, GAE advantages, and the actor/critic optimizer.

The second estimator beside GRPO. GRPO needs only each trajectory's reward and group, so it
lives in `advantages.ADVANTAGE_ESTIMATORS` (signature: rewards, group ids). GAE needs the
critic's value of every trained token, which exist only after the samples are packed and the
critic has run over the batch, so its estimators take the packed batch instead and live in the
sibling registry `TOKEN_ADVANTAGE_ESTIMATORS` (signature: batch, rewards by trajectory).

The critic is a linear head on the policy's final hidden states (one forward serves logprobs
and values). Params of an actor-critic state are {"policy": ..., "value_head": ...}; the
optimizer gives each its own learning rate (optax.multi_transform).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from memex_jax.models import transformer
from memex_jax.models.config import ModelConfig
from memex_jax.models.logprobs import logprobs_from_hidden, shift_to_targets
from memex_jax.rl.advantages import checked_estimator
from memex_jax.rl.learner import Metrics, TrainState, apply_if_finite, make_optimizer
from memex_jax.rl.losses import LossConfig, ValueLossConfig, policy_loss, value_loss
from memex_jax.rl.packing import PackedBatch

Array = jax.Array
POLICY, VALUE_HEAD = "policy", "value_head"


class ValueHead(nn.Module):
  """hidden [B T D] -> value [B T] of the state after each position (float32)."""

  @nn.compact
  def __call__(self, hidden: Array) -> Array:
    # Zero init: every state starts at value 0, so the first advantages are the raw returns.
    dense = nn.Dense(1, kernel_init=nn.initializers.zeros, dtype=jnp.float32,
                     param_dtype=jnp.float32, name="out")
    return dense(hidden.astype(jnp.float32))[..., 0]


def init_value_head(embed_dim: int, rng: Array) -> Any:
  """Params of a ValueHead on hidden states of width `embed_dim`."""
  return ValueHead().init(rng, jnp.zeros((1, 1, embed_dim), jnp.float32))["params"]


def actor_critic_params(policy_params: Any, value_head_params: Any) -> dict[str, Any]:
  """The params pytree an actor-critic TrainState holds."""
  return {POLICY: policy_params, VALUE_HEAD: value_head_params}


def actor_critic_optimizer(actor_learning_rate: float = 5e-6, critic_learning_rate: float = 1e-5,
                           weight_decay: float = 0.0, clip_norm: float | None = 1.0,
                           decay_steps: int = 0) -> optax.GradientTransformation:
  """AdamW with one param group per role: the policy at the actor rate, the head at the critic's.

  Args:
    actor_learning_rate: rate of the policy's params (ExpHarness: 5e-6).
    critic_learning_rate: rate of the value head's params (ExpHarness: 1e-5).
    weight_decay, clip_norm: as `make_optimizer`, per group.
    decay_steps: > 0: both rates decay to 0 along a cosine over this many updates, no warm-up
      (ExpHarness's schedule); 0 keeps them constant.
  """
  def group(lr):
    return make_optimizer(lr, weight_decay=weight_decay, clip_norm=clip_norm,
                          decay_steps=decay_steps)

  return optax.multi_transform(
      {"actor": group(actor_learning_rate), "critic": group(critic_learning_rate)},
      {POLICY: "actor", VALUE_HEAD: "critic"})


def logprobs_and_values(model_cfg: ModelConfig, params: Mapping[str, Any], batch: PackedBatch,
                        temperature: float = 1.0,
                        chunk_size: int = 512) -> tuple[Array, Array, Array]:
  """(logprobs, entropy, values), each [B T], from one forward of the actor-critic.

  values[t] is the critic's value of the prefix tokens[:t], the state token t was sampled in,
  so it lines up with logprobs[t] (0 where a segment starts). Logprobs and entropy are formed
  on the trained tokens only (0 where `batch.loss_mask` is 0).
  """
  policy = params[POLICY]
  hidden, _ = transformer.Transformer(model_cfg).apply(
      {"params": policy}, batch.tokens, batch.positions, segment_ids=batch.segment_ids,
      return_hidden=True)  # B T D
  logp, entropy = logprobs_from_hidden(model_cfg, policy, hidden, batch.tokens,
                                       batch.segment_ids, temperature, chunk_size,
                                       where=batch.loss_mask > 0)
  values = ValueHead().apply({"params": params[VALUE_HEAD]}, hidden[:, :-1])  # B T-1
  return logp, entropy, shift_to_targets(values, batch.tokens, batch.segment_ids)


@functools.partial(jax.jit, static_argnames=("model_cfg", "temperature", "chunk_size"))
def fill_old_logprobs_and_values(model_cfg: ModelConfig, params: Mapping[str, Any],
                                 batch: PackedBatch, temperature: float = 1.0,
                                 chunk_size: int = 512) -> PackedBatch:
  """The batch with old_logprobs and old_values of the actor-critic at the iteration's start."""
  logp, _, values = logprobs_and_values(model_cfg, params, batch, temperature, chunk_size)
  return batch.replace(old_logprobs=logp, old_values=values)


def gae(rewards: np.ndarray, values: np.ndarray, gamma: float = 1.0,
        lam: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
  """Generalized advantage estimation over one episode's T steps (Schulman et al. 2016).

  delta_t = r_t + gamma V_{t+1} - V_t (V_T = 0: the episode ends), A_t = delta_t +
  gamma lam A_{t+1}; the critic's target is A_t + V_t.

  Args:
    rewards: [T] per-step rewards.
    values: [T] the critic's value of each step's state.
    gamma: discount.
    lam: GAE's lambda (1: Monte-Carlo returns minus values; 0: one-step TD errors).

  Returns:
    (advantages [T], returns [T]) float64.
  """
  rewards, values = np.asarray(rewards, np.float64), np.asarray(values, np.float64)
  if rewards.shape != values.shape or rewards.ndim != 1:
    raise ValueError(f"gae: rewards {rewards.shape} and values {values.shape} must be equal [T]")
  advantages = np.zeros_like(rewards)
  running, next_value = 0.0, 0.0
  for t in range(len(rewards) - 1, -1, -1):
    delta = rewards[t] + gamma * next_value - values[t]
    running = delta + gamma * lam * running
    advantages[t], next_value = running, values[t]
  return advantages, advantages + values


def gae_batch(batch: PackedBatch, rewards: Mapping[int, float], *, gamma: float = 1.0,
              lam: float = 1.0, whiten: bool = True) -> PackedBatch:
  """The host batch with GAE advantages and returns on its trained tokens.

  Each packed sample is one episode whose steps are its trained tokens: the reward of its
  trajectory arrives at its last trained token, every other step earns 0.

  Args:
    batch: a numpy batch whose old_values are filled (`fill_old_logprobs_and_values`).
    rewards: trajectory id -> reward; every packed trajectory needs one.
    gamma, lam: as `gae`.
    whiten: normalise the advantages to mean 0, std 1 over all trained tokens of the batch
      (the returns keep their scale).
  """
  mask = np.asarray(batch.loss_mask) > 0
  values = np.asarray(batch.old_values, np.float64)
  segments, trajectories = np.asarray(batch.segment_ids), np.asarray(batch.trajectory_ids)
  advantages, returns = np.zeros(mask.shape), np.zeros(mask.shape)
  for row in range(mask.shape[0]):
    for segment in np.unique(segments[row][mask[row]]):
      steps = np.flatnonzero(mask[row] & (segments[row] == segment))
      tid = int(trajectories[row, steps[0]])
      if tid not in rewards:
        raise ValueError(f"gae_batch: trajectory {tid} is packed but has no reward")
      step_rewards = np.zeros(len(steps))
      step_rewards[-1] = rewards[tid]
      advantages[row, steps], returns[row, steps] = gae(step_rewards, values[row, steps], gamma,
                                                        lam)
  if whiten and mask.sum() > 1:
    trained = advantages[mask]
    advantages[mask] = (trained - trained.mean()) / (trained.std() + 1e-8)
  return batch.replace(advantages=advantages.astype(np.float32),
                       returns=returns.astype(np.float32))


TokenAdvantageFn = Callable[..., PackedBatch]
TOKEN_ADVANTAGE_ESTIMATORS: dict[str, TokenAdvantageFn] = {"gae": gae_batch}


def token_advantage_fn(name: str, **options: Any
                       ) -> Callable[[PackedBatch, Mapping[int, float]], PackedBatch]:
  """(batch, rewards) -> batch with advantages (and returns), `options` bound; checked now."""
  estimator = checked_estimator(TOKEN_ADVANTAGE_ESTIMATORS, "token advantage estimator", name,
                                options, num_inputs=2)
  return lambda batch, rewards: estimator(batch, rewards, **options)


def actor_critic_step(model_cfg: ModelConfig, loss_cfg: LossConfig, value_cfg: ValueLossConfig,
                      optimizer: optax.GradientTransformation, state: TrainState,
                      batch: PackedBatch) -> tuple[TrainState, Metrics]:
  """One PPO update of policy and value head on a batch with old logprobs/values, reference
  logprobs, GAE advantages and returns filled: policy loss + value_cfg.coef * value loss."""

  def loss_fn(params):
    logp, entropy, values = logprobs_and_values(model_cfg, params, batch, loss_cfg.temperature,
                                                loss_cfg.logit_chunk)
    actor, metrics = policy_loss(logp, batch, loss_cfg, entropy)
    critic, critic_metrics = value_loss(values, batch, value_cfg)
    loss = actor + value_cfg.coef * critic
    return loss, dict(metrics, **critic_metrics, loss=loss)

  (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
  return apply_if_finite(optimizer, state, batch, loss, grads, metrics)


jit_actor_critic_step = jax.jit(actor_critic_step, static_argnums=(0, 1, 2, 3))
