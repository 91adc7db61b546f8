"""Logical-axis rules: the model's names map onto the mesh, unknown or indivisible ones fail."""

import jax
import pytest
from jax.sharding import PartitionSpec as P

from memex_jax.models import config
from memex_jax.parallel import mesh as mesh_lib
from memex_jax.parallel import rules
from memex_jax.parallel import sharding


@pytest.fixture(scope="module")
def mesh():
  return mesh_lib.make_mesh(mesh_lib.MeshConfig(data=2, fsdp=2, tensor=2))


def test_param_rules_on_the_tiny_model(mesh):
  shapes, logical = sharding.abstract_params(config.tiny("qwen2"))
  shardings = rules.logical_to_shardings(logical, mesh, rules.PARAM_RULES, shapes)
  specs = jax.tree.map(lambda s: s.spec, shardings)
  assert specs["embed"]["embedding"] == P("tensor", "fsdp")
  assert specs["lm_head"]["kernel"] == P("fsdp", "tensor")
  assert specs["layers"]["attn"]["q_proj"]["kernel"] == P(None, "fsdp", "tensor")
  assert specs["layers"]["attn"]["q_proj"]["bias"] == P(None, "tensor")
  assert specs["layers"]["attn"]["o_proj"]["kernel"] == P(None, "tensor", "fsdp")
  assert specs["layers"]["mlp"]["down_proj"]["kernel"] == P(None, "tensor", "fsdp")
  assert specs["layers"]["attn_norm"]["scale"] == P(None, "fsdp")


@pytest.mark.parametrize("family, quant", [("llama", "none"), ("qwen3", "none"),
                                           ("llama", "int4_serve")])
def test_every_param_name_of_every_family_has_a_rule(mesh, family, quant):
  shardings = sharding.param_shardings(config.tiny(family, quant=quant), mesh)
  assert jax.tree.leaves(shardings)


def test_activation_rules():
  assert rules.logical_to_mesh_spec(P("batch", "length", "embed"), rules.ACTIVATION_RULES) == P(
      ("data", "fsdp"), None, None)
  assert rules.logical_to_mesh_spec(P("batch", "length", "heads", "head_dim"),
                                    rules.ACTIVATION_RULES) == P(("data", "fsdp"), None, "tensor",
                                                                 None)


def test_name_without_a_rule_is_an_error(mesh):
  with pytest.raises(ValueError, match=r"w: logical axes \['experts'\] have no sharding rule"):
    rules.logical_to_shardings({"w": P("experts", "embed")}, mesh, rules.PARAM_RULES)


def test_indivisible_dimension_names_the_leaf(mesh):
  shapes = {"layer": {"w": jax.ShapeDtypeStruct((6, 9), "float32")}}
  with pytest.raises(ValueError, match=r"layer/w: dimension 9 of shape \(6, 9\) is not divisible"):
    rules.logical_to_shardings({"layer": {"w": P("embed", "mlp")}}, mesh, rules.PARAM_RULES, shapes)


def test_rule_naming_an_unknown_mesh_axis_is_an_error(mesh):
  with pytest.raises(ValueError, match="not all in the mesh axes"):
    rules.logical_to_shardings({"w": P("embed")}, mesh, (("embed", "expert"),))
