"""HF config mapping and safetensors folders, checked against transformers itself."""

from __future__ import annotations

import importlib
import json

import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy
import torch
import transformers

from memex_jax.models import hf_io
from memex_jax.models import rope
from memex_jax.models.config import RopeScaling, tiny

FAMILIES = ("llama", "qwen2", "qwen3")
SCALINGS = {
    "default": None,
    "linear": RopeScaling("linear", factor=4.0),
    "llama3": RopeScaling("llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                          original_max_position=64),
    "yarn": RopeScaling("yarn", factor=4.0, original_max_position=128, beta_fast=16.0),
}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("rope_type", SCALINGS)
def test_config_roundtrips_through_transformers(family, rope_type):
  cfg = tiny(family, rope_scaling=SCALINGS[rope_type], head_dim=32)
  hf_config = transformers.AutoConfig.for_model(**hf_io.config_to_hf(cfg))

  assert hf_io.config_from_hf(hf_config.to_dict()) == cfg
  # The scaling we read gives the frequencies the family's own torch RoPE module computes.
  module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
  rotary_class = hf_io.ARCHITECTURE_CLASSES[family].replace("ForCausalLM", "RotaryEmbedding")
  reference = getattr(module, rotary_class)(hf_config)
  inv_freq, attention_factor = rope.inverse_frequencies(cfg.head_dim, cfg.rope_theta,
                                                        cfg.rope_scaling)
  np.testing.assert_allclose(inv_freq, reference.inv_freq.numpy(), rtol=1e-6)
  assert attention_factor == pytest.approx(reference.attention_scaling)


def test_legacy_rope_scaling_dict():
  hf = hf_io.config_to_hf(tiny("llama")) | {"rope_theta": 5e5}
  del hf["rope_parameters"]
  hf["rope_scaling"] = {"type": "linear", "factor": 2.0}
  cfg = hf_io.config_from_hf(hf)
  assert cfg.rope_theta == 5e5
  assert cfg.rope_scaling == RopeScaling("linear", factor=2.0)


def test_yarn_mscale_becomes_attention_factor():
  hf = hf_io.config_to_hf(tiny("qwen2"))
  hf["rope_parameters"] = {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0,
                           "original_max_position_embeddings": 128, "mscale": 1.0,
                           "mscale_all_dim": 0.5}
  hf_config = transformers.AutoConfig.for_model(**hf)
  _, hf_attention_factor = transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS["yarn"](
      hf_config, "cpu")
  scaling = hf_io.config_from_hf(hf).rope_scaling
  assert scaling.attention_factor == pytest.approx(hf_attention_factor)


@pytest.mark.parametrize("change,pattern", [
    ({"model_type": "mistral"}, r"model_type='mistral' is not supported"),
    ({"hidden_size": None}, r"missing field 'hidden_size'"),
    ({"attention_bias": True}, r"attention_bias=True is not supported"),
    ({"hidden_act": "gelu"}, r"hidden_act='gelu' is not supported"),
    ({"rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4}},
     r"rope_type='longrope' is not supported"),
    ({"rope_parameters": {"rope_type": "linear", "rope_theta": 1e4}},
     r"rope_parameters\.factor is required"),
    ({"rope_parameters": {"rope_type": "linear", "factor": 2.0, "low_freq_factor": 1.0}},
     r"rope_parameters field\(s\) \['low_freq_factor'\] are not supported"),
    ({"num_key_value_heads": 3}, r"num_heads=4 is not a multiple of num_kv_heads=3"),
])
def test_bad_config_names_file_and_field(change, pattern, tmp_path):
  hf = hf_io.config_to_hf(tiny("llama")) | change
  (tmp_path / "config.json").write_text(json.dumps(hf))
  with pytest.raises(hf_io.CheckpointError, match=pattern) as info:
    hf_io.load_hf(tmp_path)
  assert str(tmp_path / "config.json") in str(info.value)


@pytest.mark.parametrize("family", FAMILIES)
def test_load_and_save_roundtrip_with_transformers(family, tmp_path, random_torch_model):
  cfg = tiny(family)
  reference = random_torch_model(cfg)
  reference.save_pretrained(tmp_path / "torch")
  expected = {k: v.numpy() for k, v in reference.state_dict().items()}
  if cfg.tie_embeddings:
    expected.pop("lm_head.weight")

  loaded_cfg, params = hf_io.load_hf(tmp_path / "torch")
  assert loaded_cfg == cfg
  assert params["layers"]["attn"]["o_proj"]["kernel"].shape == (
      cfg.num_layers, cfg.num_heads * cfg.head_dim, cfg.embed_dim)

  hf_io.save_hf(tmp_path / "ours", loaded_cfg, params)
  reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "ours",
                                                               dtype=torch.float32)
  for name, tensor in reloaded.state_dict().items():
    if name in expected:
      np.testing.assert_array_equal(tensor.numpy(), expected[name], err_msg=name)
  assert set(expected) <= set(reloaded.state_dict())
  tokens = torch.arange(8)[None] % cfg.vocab_size
  with torch.no_grad():
    np.testing.assert_array_equal(reloaded(tokens).logits.numpy(), reference(tokens).logits.numpy())


def test_sharded_checkpoint_and_bfloat16(tmp_path, random_torch_model):
  cfg = tiny("qwen3")
  reference = random_torch_model(cfg)
  reference.save_pretrained(tmp_path, max_shard_size="100KB")
  assert (tmp_path / hf_io.INDEX_FILE).is_file()

  _, f32 = hf_io.load_hf(tmp_path)
  _, bf16 = hf_io.load_hf(tmp_path, "bfloat16")

  np.testing.assert_array_equal(f32["layers"]["attn"]["q_norm"]["scale"][1],
                                reference.model.layers[1].self_attn.q_norm.weight.detach().numpy())
  assert bf16["lm_head"]["kernel"].dtype == ml_dtypes.bfloat16
  np.testing.assert_array_equal(bf16["lm_head"]["kernel"],
                                f32["lm_head"]["kernel"].astype(ml_dtypes.bfloat16))


def _rewrite_weights(folder, edit):
  path = folder / hf_io.WEIGHTS_FILE
  tensors = safetensors.numpy.load_file(str(path))
  edit(tensors)
  safetensors.numpy.save_file(tensors, str(path))
  return path


@pytest.mark.parametrize("edit,pattern", [
    (lambda t: t.pop("model.layers.1.mlp.up_proj.weight"),
     r"tensor 'model\.layers\.1\.mlp\.up_proj\.weight' is missing"),
    (lambda t: t.update({"model.layers.0.mlp.up_proj.weight": np.zeros((128, 32), np.float32)}),
     r"'model\.layers\.0\.mlp\.up_proj\.weight' has shape \(128, 32\); .* \(128, 64\)"),
    (lambda t: t.update({"model.layers.2.mlp.up_proj.weight": np.zeros((128, 64), np.float32)}),
     r"'model\.layers\.2\.mlp\.up_proj\.weight' is not part of a qwen2 model with 2 layers"),
])
def test_bad_weights_name_file_and_tensor(edit, pattern, tmp_path, random_torch_model):
  random_torch_model(tiny("qwen2")).save_pretrained(tmp_path)
  path = _rewrite_weights(tmp_path, edit)
  with pytest.raises(hf_io.CheckpointError, match=pattern) as info:
    hf_io.load_hf(tmp_path)
  assert str(path) in str(info.value)


def test_missing_paths(tmp_path, random_torch_model):
  with pytest.raises(FileNotFoundError, match="nowhere"):
    hf_io.load_hf(tmp_path / "nowhere")
  with pytest.raises(FileNotFoundError, match="config.json"):
    hf_io.load_hf(tmp_path)
  random_torch_model(tiny("llama")).save_pretrained(tmp_path, max_shard_size="100KB")
  shard = sorted(tmp_path.glob("model-*.safetensors"))[0]
  shard.unlink()
  with pytest.raises(hf_io.CheckpointError, match=f"shard '{shard.name}' is missing"):
    hf_io.load_hf(tmp_path)


def test_tokenizer_that_does_not_match_the_weights(tmp_path, random_torch_model,
                                                   smollm2_tokenizer):
  random_torch_model(tiny("llama")).save_pretrained(tmp_path)  # vocab_size 256
  smollm2_tokenizer.save_pretrained(tmp_path)  # 49152 tokens
  with pytest.raises(hf_io.CheckpointError,
                     match=f"{tmp_path / 'tokenizer.json'}: token id 49151 does not fit"):
    hf_io.load_hf(tmp_path)


def test_save_rejects_params_of_another_shape(tmp_path):
  cfg = tiny("llama")
  params = {"embed": {"embedding": np.zeros((cfg.vocab_size, cfg.embed_dim + 1), np.float32)}}
  with pytest.raises(ValueError, match=r"embed/embedding has shape \(256, 65\)"):
    hf_io.save_hf(tmp_path, cfg, params)
