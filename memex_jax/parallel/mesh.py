"""The device mesh: axes ('data', 'fsdp', 'tensor') sized from a config.

'data' replicates params and splits the batch, 'fsdp' splits both the batch and the params'
embed dimension (ZeRO-3 style), 'tensor' splits heads, MLP and vocab dimensions (Megatron style).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import jax
from jax.sharding import AxisType, Mesh

MESH_AXES = ("data", "fsdp", "tensor")
BATCH_AXES = ("data", "fsdp")  # mesh axes the leading (batch) dimension is split over


@dataclasses.dataclass(frozen=True)
class MeshConfig:
  """Sizes of the mesh axes.

  Attributes:
    data: data-parallel replicas; -1 means all devices the other axes leave.
    fsdp: fully-sharded data-parallel ways; -1 means all devices the other axes leave.
    tensor: tensor-parallel ways; -1 means all devices the other axes leave.
  """

  data: int = 1
  fsdp: int = -1
  tensor: int = 1

  def resolve(self, num_devices: int) -> tuple[int, int, int]:
    """(data, fsdp, tensor) with the one -1 filled in; raises ValueError if impossible."""
    sizes = (self.data, self.fsdp, self.tensor)
    if any(s == 0 or s < -1 for s in sizes):
      raise ValueError(f"mesh {self._describe()}: sizes must be positive or -1")
    if sizes.count(-1) > 1:
      raise ValueError(f"mesh {self._describe()}: at most one axis may be -1")
    fixed = math.prod(s for s in sizes if s != -1)
    if -1 in sizes:
      if num_devices % fixed:
        raise ValueError(f"mesh {self._describe()}: {num_devices} devices are not divisible by "
                         f"the fixed axes' product {fixed}")
      sizes = tuple(num_devices // fixed if s == -1 else s for s in sizes)
    elif fixed != num_devices:
      raise ValueError(f"mesh {self._describe()}: product {fixed} != {num_devices} devices")
    return sizes

  def _describe(self) -> str:
    return f"data={self.data} fsdp={self.fsdp} tensor={self.tensor}"


def make_mesh(config: MeshConfig, devices: Sequence[jax.Device] | None = None) -> Mesh:
  """A ('data', 'fsdp', 'tensor') mesh with Auto axes over `devices` (default: all devices)."""
  devices = list(jax.devices() if devices is None else devices)
  shape = config.resolve(len(devices))
  return jax.make_mesh(shape, MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES),
                       devices=devices)


def batch_parallelism(mesh: Mesh) -> int:
  """How many ways the batch dimension is split: data * fsdp."""
  return math.prod(mesh.shape[a] for a in BATCH_AXES)


def round_up_batch(batch_size: int, mesh: Mesh) -> int:
  """The least multiple of data * fsdp that holds `batch_size` (e.g. decoding slots)."""
  ways = batch_parallelism(mesh)
  return -(-batch_size // ways) * ways


def check_batch_size(batch_size: int, mesh: Mesh, name: str = "batch size") -> None:
  """Raises a one-line ValueError unless `batch_size` splits evenly over data * fsdp."""
  ways = batch_parallelism(mesh)
  if batch_size % ways:
    raise ValueError(f"{name} {batch_size} is not divisible by data*fsdp = "
                     f"{mesh.shape['data']}*{mesh.shape['fsdp']} = {ways}")
