"""Sharding over a ('data', 'fsdp', 'tensor') mesh: mesh, logical-axis rules, sharded jits."""

from memex_jax.parallel.distributed import maybe_initialize
from memex_jax.parallel.mesh import (BATCH_AXES, MESH_AXES, MeshConfig, batch_parallelism,
                                     check_batch_size, make_mesh, round_up_batch)
from memex_jax.parallel.rules import (ACTIVATION_RULES, PARAM_RULES, LogicalRules,
                                      logical_to_mesh_spec, logical_to_shardings)
from memex_jax.parallel.sharding import (abstract_params, batch_shardings,
                                         optimizer_state_shardings, param_shardings, put_batch,
                                         replicated, shard_step, sharded_jit,
                                         train_state_shardings)

__all__ = [
    "ACTIVATION_RULES", "BATCH_AXES", "LogicalRules", "MESH_AXES", "MeshConfig", "PARAM_RULES",
    "abstract_params", "batch_parallelism", "batch_shardings", "check_batch_size",
    "logical_to_mesh_spec", "logical_to_shardings", "make_mesh", "maybe_initialize",
    "optimizer_state_shardings", "param_shardings", "put_batch", "replicated", "round_up_batch",
    "shard_step", "sharded_jit", "train_state_shardings",
]
