"""Shardings of params, optimizer state, train state and batches, and the sharded jits.

The train step is compiled with `jax.jit` and explicit in/out shardings (the pjit style): params
and optimizer moments live split over 'fsdp' x 'tensor' for the whole run, the batch is split
over 'data' x 'fsdp', and inside the step the model's activation constraints are resolved with
ACTIVATION_RULES on the same mesh. The sampler's sharded decode (memex_jax/sampling/sharded.py)
uses the same pieces.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from memex_jax.models import transformer
from memex_jax.models.config import ModelConfig
from memex_jax.parallel import mesh as mesh_lib
from memex_jax.parallel import rules as rules_lib

StepFn = Callable[[Any, Any], tuple[Any, Any]]


def replicated(mesh: Mesh) -> NamedSharding:
  """Every device holds the whole array (scalars, rng keys, step counters, metrics)."""
  return NamedSharding(mesh, P())


def abstract_params(cfg: ModelConfig) -> tuple[Any, Any]:
  """(params as ShapeDtypeStructs, params' logical PartitionSpecs), without allocating."""
  ids = jax.ShapeDtypeStruct((1, 1), jnp.int32)
  boxed = jax.eval_shape(transformer.Transformer(cfg).init, jax.random.PRNGKey(0), ids, ids)
  return nn.meta.unbox(boxed)["params"], nn.get_partition_spec(boxed)["params"]


def param_shardings(cfg: ModelConfig, mesh: Mesh,
                    rules: rules_lib.LogicalRules = rules_lib.PARAM_RULES) -> Any:
  """NamedShardings of the model's params; every split dimension is checked to divide."""
  shapes, logical = abstract_params(cfg)
  return rules_lib.logical_to_shardings(logical, mesh, rules, shapes)


def optimizer_state_shardings(optimizer: optax.GradientTransformation, params: Any,
                              params_shardings: Any, mesh: Mesh) -> Any:
  """Moments follow their params' shardings; scalars such as Adam's `count` are replicated.

  Args:
    optimizer: the optax transformation whose state is wanted.
    params: params or their ShapeDtypeStructs (only shapes are used).
    params_shardings: NamedShardings with the params' tree structure.
    mesh: the device mesh.
  """
  state = jax.eval_shape(optimizer.init, params)
  return optax.tree_map_params(optimizer, lambda _, sharding: sharding, state, params_shardings,
                               transform_non_params=lambda _: replicated(mesh))


def train_state_shardings(state: Any, mesh: Mesh, params_shardings: Any,
                          optimizer: optax.GradientTransformation) -> Any:
  """Shardings of a train state with `params` and `opt_state` fields; other leaves replicated.

  Args:
    state: the train state (e.g. `memex_jax.rl.TrainState`) or its ShapeDtypeStructs; a
      dataclass with fields `params` and `opt_state`.
    mesh: the device mesh.
    params_shardings: from `param_shardings`.
    optimizer: the optax transformation that built `state.opt_state`.
  """
  everything_replicated = jax.tree.map(lambda _: replicated(mesh), state)
  changes = dict(params=params_shardings,
                 opt_state=optimizer_state_shardings(optimizer, state.params, params_shardings,
                                                     mesh))
  return dataclasses.replace(everything_replicated, **changes)


def batch_shardings(batch: Any, mesh: Mesh) -> Any:
  """Every leaf split on its leading (batch) dimension over ('data', 'fsdp').

  Args:
    batch: tree of global-shaped arrays or ShapeDtypeStructs, all with a batch dimension.
    mesh: the device mesh.
  Raises:
    ValueError: (one line) a leaf is a scalar or its batch dimension does not divide.
  """

  def one(path, leaf):
    where = rules_lib.path_name(path) or "batch"
    if not leaf.shape:
      raise ValueError(f"batch field {where} is a scalar; every batch field needs a batch "
                       "dimension")
    mesh_lib.check_batch_size(leaf.shape[0], mesh, name=f"batch field {where} of size")
    return NamedSharding(mesh, P(mesh_lib.BATCH_AXES))

  return jax.tree_util.tree_map_with_path(one, batch)


def put_batch(batch: Any, shardings: Any) -> Any:
  """Places a host batch on the mesh: this process's rows of each leaf (all rows on one host)."""
  return jax.tree.map(lambda x, s: jax.make_array_from_process_local_data(s, np.asarray(x)),
                      batch, shardings)


def sharded_jit(fn: Callable[..., Any], mesh: Mesh, in_shardings: Any, out_shardings: Any,
                donate_argnums: tuple[int, ...] = (),
                rules: rules_lib.LogicalRules = rules_lib.ACTIVATION_RULES) -> Callable[..., Any]:
  """jax.jit of an un-jitted `fn` with explicit shardings, traced under `mesh` and `rules`.

  Tracing under the mesh and the activation rules is what makes the model's
  `nn.with_logical_constraint` calls into real sharding constraints.
  """

  def traced_on_mesh(*args):
    with jax.sharding.use_abstract_mesh(mesh.abstract_mesh), nn.logical_axis_rules(rules):
      return fn(*args)

  return jax.jit(traced_on_mesh, in_shardings=in_shardings, out_shardings=out_shardings,
                 donate_argnums=donate_argnums)


def shard_step(step_fn: StepFn, mesh: Mesh, state_shardings: Any, batch_sharding: Any,
               rules: rules_lib.LogicalRules = rules_lib.ACTIVATION_RULES,
               donate_state: bool = True) -> StepFn:
  """jax.jit of a pure `(state, batch) -> (state, metrics)` with explicit shardings.

  Args:
    step_fn: the un-jitted step (e.g. `functools.partial(rl.train_step, model_cfg, loss_cfg,
      optimizer)`); metrics come back replicated.
    mesh: the device mesh.
    state_shardings: from `train_state_shardings` (the state keeps its layout across steps).
    batch_sharding: from `batch_shardings`.
    rules: activation rules applied inside the step.
    donate_state: reuse the input state's buffers for the output state.
  """
  return sharded_jit(step_fn, mesh, (state_shardings, batch_sharding),
                     (state_shardings, replicated(mesh)),
                     donate_argnums=(0,) if donate_state else (), rules=rules)
