"""The learner: train state, optimizer, logprob filling, one PPO/SFT step, PPO epochs.

`train_step` and `sft_step` are pure: configs and the optimizer are static (close over them or
pass them as static jit arguments), the state and batch are array pytrees. A step whose loss
or gradients are not finite leaves params and optimizer state bit-identical and reports
`skipped = 1` (and `nonfinite = 1`), so one bad batch never ends a run.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from memex_jax.models.config import ModelConfig
from memex_jax.models.logprobs import sequence_logprobs
from memex_jax.rl.packing import PackedBatch, take_rows
from memex_jax.rl.losses import LossConfig, policy_loss, sft_loss

Array = jax.Array
Metrics = dict[str, Array]
StepFn = Callable[["TrainState", PackedBatch], tuple["TrainState", Metrics]]
LOGPROB_FIELDS = ("old_logprobs", "ref_logprobs")
# Leaves that weight decay applies to; norm scales and biases are left alone.
_DECAYED_LEAVES = ("kernel", "embedding")


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TrainState:
  """Everything an update changes.

  Attributes:
    params: the policy's parameters.
    opt_state: the optimizer's state.
    step: [] int32, learner steps taken (skipped ones included).
    rng: [2] uint32 raw PRNG key (minibatch permutations).
  """

  params: Any
  opt_state: Any
  step: Any
  rng: Any

  @classmethod
  def create(cls, params: Any, optimizer: optax.GradientTransformation,
             rng: Array) -> "TrainState":
    return cls(params=params, opt_state=optimizer.init(params),
               step=jnp.zeros((), jnp.int32), rng=rng)

  def replace(self, **changes: Any) -> "TrainState":
    return dataclasses.replace(self, **changes)


def _decay_mask(params: Any) -> Any:
  return jax.tree_util.tree_map_with_path(
      lambda path, _: getattr(path[-1], "key", None) in _DECAYED_LEAVES, params)


def learning_rate_schedule(peak: float, warmup_steps: int = 0, decay_steps: int = 0,
                           final_fraction: float = 0.0) -> optax.ScalarOrSchedule:
  """The rate per update: a linear warm-up from 0, then a cosine down to a floor, or constant.

  Args:
    peak: the rate after warm-up.
    warmup_steps: updates of the linear warm-up (0: start at the peak).
    decay_steps: > 0: after the warm-up the rate falls along a cosine to `final_fraction` of
      the peak over this many updates and stays there; 0 keeps it at the peak.
    final_fraction: the floor, as a fraction of the peak.
  """
  if decay_steps:
    return optax.warmup_cosine_decay_schedule(0.0, peak, warmup_steps, warmup_steps + decay_steps,
                                              final_fraction * peak)
  if warmup_steps:
    return optax.linear_schedule(0.0, peak, warmup_steps)
  return peak


def make_optimizer(learning_rate: float | optax.Schedule = 5e-6, weight_decay: float = 0.1,
                   clip_norm: float | None = 1.0, b1: float = 0.9, b2: float = 0.999,
                   eps: float = 1e-8, warmup_steps: int = 0, decay_steps: int = 0,
                   final_fraction: float = 0.0) -> optax.GradientTransformation:
  """AdamW (decay on kernels and embeddings only) after global-norm gradient clipping.

  Args:
    learning_rate: peak rate or an optax schedule (Memex: 5e-6).
    weight_decay: decoupled weight decay (Memex: 0.1).
    clip_norm: global gradient norm cap; None disables clipping.
    b1, b2, eps: Adam moments.
    warmup_steps, decay_steps, final_fraction: the schedule around a peak `learning_rate`, as
      `learning_rate_schedule` (ignored when `learning_rate` is a schedule). The step count
      lives in the optimizer state, so a resumed run continues the schedule where it stopped.
  """
  if not callable(learning_rate):
    learning_rate = learning_rate_schedule(learning_rate, warmup_steps, decay_steps,
                                           final_fraction)
  adamw = optax.adamw(learning_rate, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay,
                      mask=_decay_mask)
  if clip_norm is None:
    return adamw
  return optax.chain(optax.clip_by_global_norm(clip_norm), adamw)


def token_logprobs(model_cfg: ModelConfig, params: Any, batch: PackedBatch,
                   temperature: float = 1.0, chunk_size: int = 512) -> tuple[Array, Array]:
  """(logprobs [B T], entropy [B T]) of each trained token given its segment's prefix.

  Where `batch.loss_mask` is set, position t holds log pi(tokens[t] | tokens[:t]) and the
  entropy of that distribution; elsewhere both are 0 (the head is applied to trained tokens
  only: every use of these arrays is masked by the loss mask).
  """
  return sequence_logprobs(model_cfg, params, batch.tokens, batch.positions, batch.segment_ids,
                           temperature, chunk_size, return_entropy=True,
                           where=batch.loss_mask > 0)


@functools.partial(jax.jit, static_argnames=("model_cfg", "field", "temperature", "chunk_size"))
def fill_logprobs(model_cfg: ModelConfig, params: Any, batch: PackedBatch,
                  field: str = "old_logprobs", temperature: float = 1.0,
                  chunk_size: int = 512) -> PackedBatch:
  """The batch with `field` ('old_logprobs' or 'ref_logprobs') set to the model's logprobs.

  For the reference, pass the frozen reference params and their config (which may be int4).
  """
  if field not in LOGPROB_FIELDS:
    raise ValueError(f"fill_logprobs: field={field!r}; expected one of {LOGPROB_FIELDS}")
  logp, _ = token_logprobs(model_cfg, params, batch, temperature, chunk_size)
  return batch.replace(**{field: logp})


def apply_if_finite(optimizer: optax.GradientTransformation, state: TrainState,
                     batch: PackedBatch, loss: Array, grads: Any,
                     metrics: Metrics) -> tuple[TrainState, Metrics]:
  """One optimizer update, or none if loss or gradients are not finite or nothing is trained.

  A skipped update leaves params and optimizer state bit-identical (only `step` advances); an
  all-padding minibatch is skipped too, since AdamW would still decay the weights on it.
  """
  finite = jnp.isfinite(loss)
  for g in jax.tree.leaves(grads):
    finite = finite & jnp.all(jnp.isfinite(g))
  apply = finite & (jnp.sum(batch.loss_mask) > 0)
  updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
  params = optax.apply_updates(state.params, updates)
  keep = lambda new, old: jnp.where(apply, new, old)
  state = state.replace(params=jax.tree.map(keep, params, state.params),
                        opt_state=jax.tree.map(keep, opt_state, state.opt_state),
                        step=state.step + 1)
  grad_norm = optax.tree.norm(grads)
  metrics = dict(metrics, grad_norm=grad_norm,
                 skipped=jnp.logical_not(apply).astype(jnp.int32),
                 nonfinite=jnp.logical_not(finite).astype(jnp.int32))
  return state, metrics


def train_step(model_cfg: ModelConfig, loss_cfg: LossConfig,
               optimizer: optax.GradientTransformation, state: TrainState,
               batch: PackedBatch) -> tuple[TrainState, Metrics]:
  """One MemexRL update on a batch whose old (and reference) logprobs are filled."""

  def loss_fn(params):
    logp, entropy = token_logprobs(model_cfg, params, batch, loss_cfg.temperature,
                                   loss_cfg.logit_chunk)
    return policy_loss(logp, batch, loss_cfg, entropy)

  (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
  return apply_if_finite(optimizer, state, batch, loss, grads, metrics)


def sft_step(model_cfg: ModelConfig, optimizer: optax.GradientTransformation,
             state: TrainState, batch: PackedBatch) -> tuple[TrainState, Metrics]:
  """One supervised update: mean NLL of the trained tokens (the SFT warm start)."""

  def loss_fn(params):
    logp, _ = token_logprobs(model_cfg, params, batch)
    return sft_loss(logp, batch)

  (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
  return apply_if_finite(optimizer, state, batch, loss, grads, metrics)


def sft_nll_sum(model_cfg: ModelConfig, params: Any, batch: PackedBatch) -> tuple[Array, Array]:
  """(summed NLL, count) over the trained tokens of a minibatch: a held-out set's loss is the
  sum over its minibatches of the first over the sum of the second (token-weighted, like
  `sft_loss`, however the set is packed)."""
  logp, _ = token_logprobs(model_cfg, params, batch)
  mask = batch.loss_mask > 0
  return -jnp.sum(jnp.where(mask, logp, 0.0)), jnp.sum(mask).astype(jnp.float32)


# Jitted with the configs and optimizer static (all hashable), so one compile serves a run.
jit_train_step = jax.jit(train_step, static_argnums=(0, 1, 2))
jit_sft_step = jax.jit(sft_step, static_argnums=(0, 1))


def ppo_epochs(step_fn: StepFn, state: TrainState, batch: PackedBatch, *, minibatch_rows: int,
               num_epochs: int = 1,
               needs_reference: bool = False) -> tuple[TrainState, dict[str, float]]:
  """num_epochs passes over every row of `batch`, one update per [minibatch_rows, T] minibatch.

  Each epoch visits the rows along a permutation drawn from state.rng (so a resumed run replays
  the same split); the number of updates per epoch follows the batch's rows, i.e. what the
  iteration generated.

  Args:
    step_fn: (state, minibatch) -> (state, metrics), e.g. the jitted `train_step`, or a sharded
      one that places the host minibatch on the mesh first.
    state: the train state.
    batch: [k * minibatch_rows, T] host batch with old (and reference) logprobs filled.
    minibatch_rows: rows per update.
    num_epochs: passes over the batch.
    needs_reference: the loss reads reference logprobs (kl_coef > 0): refuse a batch whose
      trained tokens have none.

  Returns:
    (state, metrics): means over the updates, except `skipped` and `nonfinite` (summed) and
    `num_updates`.
  """
  b = batch.shape[0]
  if num_epochs < 1 or minibatch_rows < 1 or b % minibatch_rows:
    raise ValueError(f"ppo_epochs: {b} rows cannot be split into minibatches of "
                     f"minibatch_rows={minibatch_rows} for num_epochs={num_epochs}")
  trained = np.asarray(batch.loss_mask) > 0
  if needs_reference and trained.any() and not np.asarray(batch.ref_logprobs)[trained].any():
    raise ValueError("ppo_epochs: the loss needs reference logprobs but batch.ref_logprobs is "
                     "all zeros on the trained tokens; fill them with fill_logprobs(..., "
                     "field='ref_logprobs')")
  rng, perm_rng = jax.random.split(state.rng)
  state = state.replace(rng=rng)
  history = []
  for epoch in range(num_epochs):
    order = np.asarray(jax.random.permutation(jax.random.fold_in(perm_rng, epoch), b))
    for rows in np.split(order, b // minibatch_rows):
      state, metrics = step_fn(state, take_rows(batch, rows))
      history.append(metrics)
  history = jax.device_get(history)
  summary = {k: float(np.mean([m[k] for m in history])) for k in history[0]}
  for key in ("skipped", "nonfinite"):
    summary[key] = int(sum(int(m[key]) for m in history))
  summary["num_updates"] = len(history)
  return state, summary
