"""Mesh construction from MeshConfig on 8 fake CPU devices."""

import jax
import pytest
from jax.sharding import AxisType

from memex_jax.parallel import mesh as mesh_lib


def test_full_mesh_has_the_three_auto_axes():
  mesh = mesh_lib.make_mesh(mesh_lib.MeshConfig(data=2, fsdp=2, tensor=2))
  assert mesh.axis_names == ("data", "fsdp", "tensor")
  assert dict(mesh.shape) == {"data": 2, "fsdp": 2, "tensor": 2}
  assert mesh.axis_types == (AxisType.Auto,) * 3
  assert mesh_lib.batch_parallelism(mesh) == 4


@pytest.mark.parametrize("config, shape", [
    (mesh_lib.MeshConfig(), (1, 8, 1)),
    (mesh_lib.MeshConfig(data=2, fsdp=-1, tensor=2), (2, 2, 2)),
    (mesh_lib.MeshConfig(data=-1, fsdp=1, tensor=4), (2, 1, 4)),
])
def test_minus_one_fills_the_remaining_devices(config, shape):
  mesh = mesh_lib.make_mesh(config)
  assert tuple(mesh.shape.values()) == shape


def test_mesh_over_a_subset_of_devices():
  devices = jax.devices()[4:]
  mesh = mesh_lib.make_mesh(mesh_lib.MeshConfig(data=1, fsdp=2, tensor=2), devices=devices)
  assert set(mesh.devices.flat) == set(devices)


@pytest.mark.parametrize("config, message", [
    (mesh_lib.MeshConfig(data=2, fsdp=2, tensor=1), "product 4 != 8 devices"),
    (mesh_lib.MeshConfig(data=3, fsdp=-1, tensor=1), "not divisible by the fixed axes' product 3"),
    (mesh_lib.MeshConfig(data=-1, fsdp=-1, tensor=1), "at most one axis may be -1"),
    (mesh_lib.MeshConfig(data=0, fsdp=-1, tensor=1), "sizes must be positive or -1"),
])
def test_impossible_mesh_is_a_one_line_error(config, message):
  with pytest.raises(ValueError, match=message) as info:
    mesh_lib.make_mesh(config)
  assert "\n" not in str(info.value)
  assert f"data={config.data}" in str(info.value)


def test_batch_must_divide_over_data_and_fsdp():
  mesh = mesh_lib.make_mesh(mesh_lib.MeshConfig(data=2, fsdp=2, tensor=2))
  mesh_lib.check_batch_size(8, mesh)
  with pytest.raises(ValueError, match=r"batch size 6 is not divisible by data\*fsdp = 2\*2 = 4"):
    mesh_lib.check_batch_size(6, mesh)
  assert [mesh_lib.round_up_batch(n, mesh) for n in (1, 4, 5, 8)] == [4, 4, 8, 8]
