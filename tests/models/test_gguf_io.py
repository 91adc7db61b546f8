"""GGUF loading, checked against transformers' own GGUF loader on small files we write.

The files are written the way llama.cpp's converter writes them: tensor names from the `gguf`
package's own name map, llama q/k rows permuted, one projection quantised to Q8_0.
"""

from __future__ import annotations

import pathlib
from typing import Any

import gguf
import ml_dtypes
import numpy as np
import pytest
import torch
import transformers

from memex_jax.models import gguf_io
from memex_jax.models import hf_io
from memex_jax.models import rope
from memex_jax.models.config import RopeScaling, tiny

FAMILIES = ("llama", "qwen2", "qwen3")
_ARCHS = {"llama": gguf.MODEL_ARCH.LLAMA, "qwen2": gguf.MODEL_ARCH.QWEN2,
          "qwen3": gguf.MODEL_ARCH.QWEN3}


def llama_cpp_permute(weight: np.ndarray, num_heads: int) -> np.ndarray:
  """The row order llama.cpp writes llama q/k projections in (pairs interleaved per head)."""
  rows = weight.shape[0]
  return weight.reshape(num_heads, 2, rows // num_heads // 2, *weight.shape[1:]).swapaxes(
      1, 2).reshape(weight.shape)


def write_gguf(path: pathlib.Path, model: Any, cfg: Any, arch: str | None = None,
               fields: dict[str, Any] | None = None, drop: tuple[str, ...] = (),
               tensors: dict[str, np.ndarray] | None = None) -> pathlib.Path:
  """Writes `model` (a transformers CausalLM of config `cfg`) as a GGUF file.

  Args:
    path: output file.
    model: the torch model whose state_dict is written.
    cfg: its ModelConfig, for the metadata.
    arch: general.architecture to claim (default cfg.family).
    fields: extra or overriding metadata ({arch} in keys is replaced); None values drop a key.
    drop: GGUF tensor names to leave out.
    tensors: extra raw tensors to add (float32).
  """
  arch = arch or cfg.family
  writer = gguf.GGUFWriter(str(path), arch)
  meta = {
      "{arch}.block_count": cfg.num_layers, "{arch}.context_length": cfg.max_position,
      "{arch}.embedding_length": cfg.embed_dim, "{arch}.feed_forward_length": cfg.mlp_dim,
      "{arch}.attention.head_count": cfg.num_heads,
      "{arch}.attention.head_count_kv": cfg.num_kv_heads,
      "{arch}.attention.key_length": cfg.head_dim, "{arch}.rope.dimension_count": cfg.head_dim,
      "{arch}.rope.freq_base": cfg.rope_theta,
      "{arch}.attention.layer_norm_rms_epsilon": cfg.norm_eps,
      "{arch}.vocab_size": cfg.vocab_size,
  } | (fields or {})
  for key, value in meta.items():
    if value is None:
      continue
    key = key.format(arch=arch)
    if isinstance(value, str):
      writer.add_string(key, value)
    elif isinstance(value, list):
      writer.add_array(key, value)
    elif isinstance(value, float):
      writer.add_float32(key, value)
    else:
      writer.add_uint32(key, value)
  names = gguf.get_tensor_name_map(_ARCHS[cfg.family], cfg.num_layers)
  heads = {"attn_q": cfg.num_heads, "attn_k": cfg.num_kv_heads}
  for name_hf, tensor in model.state_dict().items():
    if cfg.tie_embeddings and name_hf == "lm_head.weight":
      continue
    name = names.get_name(name_hf, try_suffixes=(".weight", ".bias"))
    if name in drop:
      continue
    array = tensor.numpy()
    kind = name.split(".")[-2]
    if cfg.family == "llama" and kind in heads:
      array = llama_cpp_permute(array, heads[kind])
    if kind == "ffn_up":
      q8 = gguf.GGMLQuantizationType.Q8_0
      writer.add_tensor(name, gguf.quants.quantize(array, q8), raw_dtype=q8)
    else:
      writer.add_tensor(name, array)
  for name, array in (tensors or {}).items():
    writer.add_tensor(name, array.astype(np.float32))
  writer.write_header_to_file()
  writer.write_kv_data_to_file()
  writer.write_tensors_to_file()
  writer.close()
  return path


@pytest.mark.parametrize("family", FAMILIES)
def test_matches_transformers_gguf_loader(family, tmp_path, random_torch_model):
  # transformers ignores qwen3's attention.key_length and assumes Qwen3Config's head_dim=128.
  cfg = tiny(family, head_dim=128) if family == "qwen3" else tiny(family)
  path = write_gguf(tmp_path / "model.gguf", random_torch_model(cfg), cfg)
  reference = transformers.AutoModelForCausalLM.from_pretrained(
      str(tmp_path), gguf_file=path.name, dtype=torch.float32)

  loaded_cfg, params = gguf_io.load_gguf(path)

  assert loaded_cfg == cfg
  expected = {k: v.numpy() for k, v in reference.state_dict().items()}
  if cfg.tie_embeddings:
    expected.pop("lm_head.weight")
  ours = hf_io.tensors_from_params(loaded_cfg, params)
  assert sorted(ours) == sorted(expected)
  for name, array in ours.items():
    np.testing.assert_array_equal(array, expected[name], err_msg=name)


def test_loads_bfloat16(tmp_path, random_torch_model):
  cfg = tiny("qwen2")
  path = write_gguf(tmp_path / "model.gguf", random_torch_model(cfg), cfg)
  _, f32 = gguf_io.load_gguf(path)
  _, bf16 = gguf_io.load_gguf(path, "bfloat16")
  kernel = bf16["layers"]["attn"]["q_proj"]["kernel"]
  assert kernel.dtype == ml_dtypes.bfloat16
  np.testing.assert_array_equal(kernel,
                                f32["layers"]["attn"]["q_proj"]["kernel"].astype(kernel.dtype))


@pytest.mark.parametrize("fields,expected", [
    ({"{arch}.rope.scaling.type": "linear", "{arch}.rope.scaling.factor": 4.0},
     RopeScaling("linear", factor=4.0)),
    ({"{arch}.rope.scaling.type": "yarn", "{arch}.rope.scaling.factor": 4.0,
      "{arch}.rope.scaling.original_context_length": 128,
      "{arch}.rope.scaling.yarn_beta_fast": 16.0},
     RopeScaling("yarn", factor=4.0, original_max_position=128, beta_fast=16.0)),
])
def test_rope_scaling_metadata(fields, expected, tmp_path, random_torch_model):
  cfg = tiny("qwen3")
  path = write_gguf(tmp_path / "model.gguf", random_torch_model(cfg), cfg, fields=fields)
  assert gguf_io.load_gguf(path)[0].rope_scaling == expected


def test_llama3_scaling_recovered_from_rope_freqs(tmp_path, random_torch_model):
  # llama.cpp stores llama3 scaling only as per-frequency divisors; HF computes the reference.
  scaling = RopeScaling("llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                        original_max_position=256)
  cfg = tiny("llama", head_dim=64, rope_scaling=scaling)
  hf_config = transformers.LlamaConfig(**hf_io.config_to_hf(cfg))
  hf_inv_freq, _ = transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS["llama3"](hf_config, "cpu")
  plain, _ = rope.inverse_frequencies(cfg.head_dim, cfg.rope_theta, None)
  divisors = plain / hf_inv_freq.numpy()
  assert 1 < np.sum((divisors > 1.0001) & (divisors < 7.999))  # the smooth band is exercised
  path = write_gguf(tmp_path / "model.gguf", random_torch_model(cfg.replace(rope_scaling=None)),
                    cfg, tensors={gguf_io.ROPE_FREQS: divisors})

  loaded = gguf_io.load_gguf(path)[0]

  assert loaded.rope_scaling.rope_type == "llama3"
  assert loaded.rope_scaling.factor == pytest.approx(8.0)
  ours, _ = rope.inverse_frequencies(cfg.head_dim, cfg.rope_theta, loaded.rope_scaling)
  np.testing.assert_allclose(ours, hf_inv_freq.numpy(), rtol=1e-6)


def test_rope_freqs_that_are_not_llama3_are_refused(tmp_path, random_torch_model):
  cfg = tiny("llama")
  divisors = np.linspace(1.0, 3.0, cfg.head_dim // 2) ** 2  # no llama3 band structure
  path = write_gguf(tmp_path / "model.gguf", random_torch_model(cfg), cfg,
                    tensors={gguf_io.ROPE_FREQS: divisors})
  with pytest.raises(hf_io.CheckpointError, match=f"{path}.*rope_freqs.weight"):
    gguf_io.load_gguf(path)


def test_hf_and_gguf_names_are_inverse():
  for name in ("token_embd.weight", "output.weight", "blk.7.attn_q.bias", "blk.0.ffn_down.weight",
               "blk.12.attn_k_norm.weight"):
    assert gguf_io.gguf_name(gguf_io.hf_name(name)) == name
  assert gguf_io.hf_name("blk.3.attn_output.weight") == "model.layers.3.self_attn.o_proj.weight"


@pytest.mark.parametrize("change,error,pattern", [
    ({"arch": "gpt2"}, hf_io.CheckpointError, r"general\.architecture='gpt2'"),
    ({"fields": {"{arch}.block_count": None}}, hf_io.CheckpointError, r"'llama\.block_count'"),
    ({"fields": {"{arch}.feed_forward_length": 96}}, hf_io.CheckpointError,
     r"'blk\.0\.ffn_gate\.weight' has shape \(128, 64\).*\(96, 64\)"),
    ({"fields": {"{arch}.attention.head_count_kv": 3}}, hf_io.CheckpointError,
     r"num_heads=4 is not a multiple of num_kv_heads=3"),
    ({"drop": ("blk.1.ffn_down.weight",)}, hf_io.CheckpointError,
     r"'blk\.1\.ffn_down\.weight' is missing"),
    ({"fields": {"tokenizer.ggml.tokens": [f"t{i}" for i in range(300)]}},
     hf_io.CheckpointError, r"tokenizer\.ggml\.tokens has 300 tokens.*does not match"),
    ({"fields": {"{arch}.rope.scaling.yarn_log_multiplier": 0.1}}, hf_io.CheckpointError,
     r"'llama\.rope\.scaling\.yarn_log_multiplier' is not supported"),
    ({"fields": {"{arch}.attention.key_length": 32, "{arch}.rope.dimension_count": 32}},
     hf_io.CheckpointError, r"'blk\.0\.attn_q\.weight' has shape \(64, 64\).*\(128, 64\)"),
    ({"fields": {"{arch}.rope.dimension_count": 8}}, hf_io.CheckpointError,
     r"llama\.rope\.dimension_count=8 differs from the head dimension 16"),
    ({"tensors": {"blk.0.ffn_gate_exps.weight": np.zeros((2, 2))}}, hf_io.CheckpointError,
     r"'blk\.0\.ffn_gate_exps\.weight' is not part of a llama model"),
])
def test_bad_files_name_file_and_field(change, error, pattern, tmp_path, random_torch_model):
  cfg = tiny("llama")
  path = write_gguf(tmp_path / "model.gguf", random_torch_model(cfg), cfg, **change)
  with pytest.raises(error, match=pattern) as info:
    gguf_io.load_gguf(path)
  assert str(info.value).count(str(path)) == 1  # named once, not once per wrapping layer


def test_missing_and_non_gguf_files(tmp_path):
  with pytest.raises(FileNotFoundError, match="nowhere.gguf"):
    gguf_io.load_gguf(tmp_path / "nowhere.gguf")
  text = tmp_path / "notes.gguf"
  text.write_text("this is not a model " * 4)
  with pytest.raises(hf_io.CheckpointError, match=f"{text}: not a GGUF file"):
    gguf_io.load_gguf(text)
  truncated = tmp_path / "cut.gguf"
  truncated.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + (1).to_bytes(8, "little") +
                        (5).to_bytes(8, "little") + b"\x00" * 8)
  with pytest.raises(hf_io.CheckpointError,
                     match=f"{truncated}: truncated or corrupt GGUF header, in metadata field ''"):
    gguf_io.load_gguf(truncated)


def test_tensor_past_the_end_of_the_file_is_refused(tmp_path, random_torch_model):
  cfg = tiny("llama")
  path = write_gguf(tmp_path / "model.gguf", random_torch_model(cfg), cfg)
  cut = tmp_path / "cut.gguf"
  cut.write_bytes(path.read_bytes()[:-64])  # past any alignment padding, into the last tensor
  with pytest.raises(hf_io.CheckpointError,
                     match=f"{cut}: tensor '.*' runs past the end of the file"):
    gguf_io.load_gguf(cut)

