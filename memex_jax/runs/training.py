"""A train state placed on the mesh with its jitted step, and resuming it from checkpoints."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax

from memex_jax import parallel
from memex_jax import rl
from memex_jax.models.config import ModelConfig
from memex_jax.runs import checkpoint as checkpoint_lib
from memex_jax.runs.params_export import import_params


@dataclasses.dataclass(frozen=True)
class ShardedTraining:
  """A train state placed on the mesh, its jitted step, and the shardings both were built for.

  Attributes:
    state: the rl.TrainState, params and optimizer state sharded, the rest replicated.
    step_fn: `(state, host minibatch) -> (state, metrics)`: places the [rows, T] minibatch on the
      mesh and runs the sharded step, which donates the state it is given.
    params_shardings: the params' NamedShardings.
    batch_shardings: the NamedShardings of a [rows, T] PackedBatch.
  """

  state: rl.TrainState
  step_fn: Callable[..., Any]
  params_shardings: Any
  batch_shardings: Any

  def put(self, minibatch: rl.PackedBatch) -> rl.PackedBatch:
    """A host [rows, T] minibatch placed on the mesh as the step expects it."""
    return parallel.put_batch(minibatch, self.batch_shardings)


def sharded_training(model_cfg: ModelConfig, params: Any, optimizer: Any,
                     step: Callable[..., Any], mesh: Any, seed: int, minibatch_rows: int,
                     seq_len: int, init_checkpoint: str = "") -> ShardedTraining:
  """The train state of `params` on `mesh` and `step` jitted for it.

  Args:
    model_cfg: the policy's config (decides the params' shardings).
    params: the policy's host params.
    optimizer: the optax transformation `step` applies.
    step: the un-jitted `(state, batch) -> (state, metrics)`, e.g.
      `functools.partial(rl.sft_step, model_cfg, optimizer)`.
    mesh: the device mesh.
    seed: seeds the state's rng.
    minibatch_rows, seq_len: the [rows, T] shape of the minibatches `step` takes.
    init_checkpoint: a params export to start from instead of `params` ('' = `params`).
  """
  p_shard = parallel.param_shardings(model_cfg, mesh)
  params = jax.device_put(params, p_shard)
  if init_checkpoint:
    params = import_params(init_checkpoint, params)
  state = rl.TrainState.create(params, optimizer, jax.random.PRNGKey(seed))
  s_shard = parallel.train_state_shardings(state, mesh, p_shard, optimizer)
  b_shard = parallel.batch_shardings(rl.empty_batch(minibatch_rows, seq_len), mesh)
  sharded_step = parallel.shard_step(step, mesh, s_shard, b_shard)
  step_fn = lambda state, minibatch: sharded_step(state, parallel.put_batch(minibatch, b_shard))
  return ShardedTraining(state=jax.device_put(state, s_shard), step_fn=step_fn,
                         params_shardings=p_shard, batch_shardings=b_shard)


def restore_latest(ckpt: checkpoint_lib.Checkpointer,
                   target: Any) -> checkpoint_lib.Restored | None:
  """The newest checkpoint that restores onto `target` (None: none), naming each one rejected."""
  restored = ckpt.restore_latest(target)
  if restored is not None:
    for step, reason in restored.rejected:
      print(f"checkpoint {step} rejected ({reason}); resumed from {restored.step}")
  return restored
