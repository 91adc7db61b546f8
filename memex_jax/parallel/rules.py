"""Logical-axis rules: the one place where the model's axis names meet the mesh's axes.

The model names every parameter and activation dimension ('embed', 'q_heads', 'batch', ...);
these rules say which mesh axes split each name. Params and activations have separate rules
because the same name is split differently: a param's 'embed' dimension is sharded over 'fsdp'
(gathered just before use), an activation's 'embed' dimension stays whole.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

MeshAxes = str | tuple[str, ...] | None
LogicalRules = tuple[tuple[str, MeshAxes], ...]

PARAM_RULES: LogicalRules = (
    ("vocab", "tensor"),
    ("embed", "fsdp"),
    ("q_heads", "tensor"),
    ("kv_heads", "tensor"),
    ("mlp", "tensor"),
    ("head_dim", None),
    ("layers", None),  # the nn.scan axis: every device holds all layers of its shard
)

ACTIVATION_RULES: LogicalRules = (
    ("batch", ("data", "fsdp")),
    ("length", None),
    ("embed", None),
    ("heads", "tensor"),
    ("kv_heads", "tensor"),
    ("head_dim", None),
    ("mlp", "tensor"),
    ("vocab", "tensor"),
)


def path_name(path: tuple[Any, ...]) -> str:
  """'params/layers/attn/q_proj/kernel' for a pytree key path."""
  return jax.tree_util.keystr(path, simple=True, separator="/")


def _mesh_axes_size(mesh: Mesh, axes: MeshAxes) -> int:
  names = () if axes is None else (axes,) if isinstance(axes, str) else axes
  size = 1
  for name in names:
    size *= mesh.shape[name]
  return size


def logical_to_mesh_spec(logical: P, rules: LogicalRules, where: str = "array") -> P:
  """The mesh PartitionSpec of one logical spec; a name without a rule is an error."""
  known = {name for name, _ in rules}
  unknown = [name for name in logical if name is not None and name not in known]
  if unknown:
    raise ValueError(f"{where}: logical axes {unknown} have no sharding rule "
                     f"(known: {sorted(known)})")
  return nn.logical_to_mesh_axes(tuple(logical), rules)


def logical_to_shardings(logical_specs: Any, mesh: Mesh, rules: LogicalRules,
                         shapes: Any = None) -> Any:
  """Turns a tree of logical PartitionSpecs into NamedShardings on `mesh`.

  Args:
    logical_specs: tree of PartitionSpec over logical names (e.g. `nn.get_partition_spec`).
    mesh: the device mesh.
    rules: PARAM_RULES, ACTIVATION_RULES or the caller's own.
    shapes: optional matching tree of arrays or ShapeDtypeStructs; when given, every split
      dimension is checked to divide evenly, with an error naming the leaf.

  Returns:
    The same tree with a NamedSharding at each leaf.
  """
  mesh_axes = set(mesh.axis_names)
  for _, axes in rules:
    names = () if axes is None else (axes,) if isinstance(axes, str) else axes
    if not set(names) <= mesh_axes:
      raise ValueError(f"rule mesh axes {names} are not all in the mesh axes {mesh.axis_names}")

  def one(path, logical, shaped=None):
    where = path_name(path)
    spec = logical_to_mesh_spec(logical, rules, where)
    if shaped is not None:
      for dim, axes in zip(shaped.shape, spec):
        ways = _mesh_axes_size(mesh, axes)
        if dim % ways:
          raise ValueError(f"{where}: dimension {dim} of shape {tuple(shaped.shape)} is not "
                           f"divisible by mesh axes {axes} ({ways} ways)")
    return NamedSharding(mesh, spec)

  is_spec = lambda x: isinstance(x, P)
  if shapes is None:
    return jax.tree_util.tree_map_with_path(one, logical_specs, is_leaf=is_spec)
  return jax.tree_util.tree_map_with_path(one, logical_specs, shapes, is_leaf=is_spec)
