"""GGUF files (llama, qwen2, qwen3; any quantisation llama.cpp writes) -> config + parameter tree.

Tensors are dequantised with the `gguf` package, renamed to their HF names and handed to
`hf_io.params_from_tensors`, so both formats share one set of name and shape checks.
llama.cpp stores llama-arch q/k projections with each head's rows interleaved (pairs) for its
rotary kernel; we undo that to the HF half-split order. qwen2/qwen3 files are not permuted.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
from typing import Any

import gguf
import numpy as np

from memex_jax.models import gguf_file
from memex_jax.models import hf_io
from memex_jax.models import rope
from memex_jax.models.config import ModelConfig, RopeScaling

ARCHITECTURES = ("llama", "qwen2", "qwen3")
ROPE_FREQS = "rope_freqs.weight"
_GLOBAL_NAMES = {"token_embd.weight": "model.embed_tokens.weight",
                 "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}
_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight", "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.weight": "self_attn.k_proj.weight", "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.weight": "self_attn.v_proj.weight", "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
# rope.scaling.* keys we interpret; any other one would change the math, so it is refused.
_ROPE_SCALING_KEYS = {"type", "factor", "original_context_length", "yarn_beta_fast",
                      "yarn_beta_slow", "finetuned"}
_REQUIRED = object()


def hf_name(name: str) -> str:
  """GGUF tensor name -> HF name ('blk.3.attn_q.weight' -> 'model.layers.3.self_attn...')."""
  if name in _GLOBAL_NAMES:
    return _GLOBAL_NAMES[name]
  parts = name.split(".", 2)
  if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in _LAYER_NAMES:
    return f"model.layers.{parts[1]}.{_LAYER_NAMES[parts[2]]}"
  return name  # unknown: reported by name as an unexpected tensor


def gguf_name(name: str) -> str:
  """HF tensor name -> GGUF name (inverse of hf_name), for error messages."""
  for gguf_global, hf_global in _GLOBAL_NAMES.items():
    if name == hf_global:
      return gguf_global
  parts = name.split(".", 3)
  by_hf = {v: k for k, v in _LAYER_NAMES.items()}
  if len(parts) == 4 and parts[:2] == ["model", "layers"] and parts[3] in by_hf:
    return f"blk.{parts[2]}.{by_hf[parts[3]]}"
  return name


def unpermute_rows(weight: np.ndarray, num_heads: int) -> np.ndarray:
  """Undoes llama.cpp's q/k row order: per head, (pairs, 2) -> (2, pairs), i.e. HF half-split."""
  rows = weight.shape[0]
  per_head = weight.reshape(num_heads, rows // num_heads // 2, 2, *weight.shape[1:])
  return per_head.swapaxes(1, 2).reshape(weight.shape)


def _float32(value: Any) -> float:
  """A float32 metadata value as the decimal it was written from (9.99999975e-06 -> 1e-05)."""
  return float(str(np.float32(value)))


@dataclasses.dataclass(frozen=True)
class GGUFTensor:
  """One tensor of a GGUF file, its bytes not yet read.

  Attributes:
    name: GGUF name ('blk.0.attn_q.weight').
    shape: GGUF order, innermost dimension first ([in, out] for a Linear weight).
    qtype: storage type (F32, Q4_1, ...).
    data: the raw bytes, [rows, bytes per row] uint8 (a view into the memory-mapped file).
  """

  name: str
  shape: tuple[int, ...]
  qtype: gguf.GGMLQuantizationType
  data: np.ndarray


def read_gguf(path: str | pathlib.Path) -> tuple[dict[str, Any], dict[str, GGUFTensor]]:
  """Metadata and tensors of a GGUF v2/v3 file; tensor bytes stay memory-mapped.

  Raises:
    FileNotFoundError: `path` is not a file.
    hf_io.CheckpointError: a bad header, or a tensor of an unknown type or outside the file.
  """
  try:
    header = gguf_file.read_header(path)
  except gguf_file.GGUFError as e:
    raise hf_io.CheckpointError(str(e)) from e
  path, buf = header.path, np.memmap(header.path, np.uint8, mode="r")
  tensors = {}
  for info in header.tensors.values():
    name, shape = info.name, info.shape
    try:
      qtype = gguf.GGMLQuantizationType(info.ggml_type)
    except ValueError as e:
      raise hf_io.CheckpointError(f"{path}: tensor {name!r} has unknown type "
                                  f"{info.ggml_type}") from e
    block, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    if not shape or shape[0] % block:
      raise hf_io.CheckpointError(f"{path}: tensor {name!r} of shape {shape} does not split into "
                                  f"{qtype.name} blocks of {block}")
    row_bytes = shape[0] // block * block_bytes
    rows = int(np.prod(shape[1:], dtype=np.int64))
    begin = header.data_start + info.offset
    if begin + rows * row_bytes > header.file_size:
      raise hf_io.CheckpointError(f"{path}: tensor {name!r} runs past the end of the file")
    data = buf[begin:begin + rows * row_bytes].reshape(rows, row_bytes)
    tensors[name] = GGUFTensor(name, shape, qtype, data)
  return header.metadata, tensors


class _Metadata:
  """Typed access to a GGUF file's key/value fields, with errors naming file and key."""

  def __init__(self, fields: dict[str, Any], tensors: dict[str, GGUFTensor], path: pathlib.Path):
    self.fields, self.tensors, self.path = fields, tensors, path

  def get(self, key: str, default: Any = _REQUIRED) -> Any:
    if key not in self.fields:
      if default is _REQUIRED:
        raise hf_io.CheckpointError(f"{self.path}: metadata field {key!r} is missing")
      return default
    return self.fields[key]


def _llama3_from_rope_freqs(divisors: np.ndarray, head_dim: int, theta: float,
                            original: int, path: pathlib.Path) -> RopeScaling:
  """Recovers llama3 RoPE scaling from llama.cpp's per-frequency divisors (rope_freqs.weight).

  Only the ratios low_freq_factor / original and high_freq_factor / original matter, so
  `original` is taken as given and the two factors are fit to the smoothly scaled band.
  """
  inv_freq, _ = rope.inverse_frequencies(head_dim, theta, None)
  inv_freq = inv_freq.astype(np.float64)
  factor = float(divisors.max())
  medium = (divisors > 1 + 1e-6) & (divisors < factor * (1 - 1e-6))
  low_freq_factor, high_freq_factor = 1.0, 4.0
  if factor > 1 and medium.sum() >= 2:
    smooth = (1 / divisors[medium] - 1 / factor) / (1 - 1 / factor)  # 0 at low edge, 1 at high
    position = original * inv_freq[medium] / (2 * math.pi)  # = low + smooth * (high - low)
    slope, low_freq_factor = np.polyfit(smooth, position, 1)
    high_freq_factor = low_freq_factor + slope
  scaling = RopeScaling("llama3", factor=factor, low_freq_factor=float(low_freq_factor),
                        high_freq_factor=float(high_freq_factor), original_max_position=original)
  scaled, _ = rope.inverse_frequencies(head_dim, theta, scaling)
  if not np.allclose(scaled, inv_freq / divisors, rtol=1e-4):
    raise hf_io.CheckpointError(f"{path}: tensor {ROPE_FREQS!r} is not a llama3 RoPE scaling")
  return scaling


def _rope_scaling(meta: _Metadata, arch: str, head_dim: int, theta: float,
                  max_position: int) -> RopeScaling | None:
  """RopeScaling from `{arch}.rope.scaling.*` metadata or a llama3 `rope_freqs.weight` tensor."""
  prefix = f"{arch}.rope.scaling."
  unknown = [k for k in meta.fields
             if k.startswith(prefix) and k[len(prefix):] not in _ROPE_SCALING_KEYS]
  if unknown:
    raise hf_io.CheckpointError(f"{meta.path}: metadata field {unknown[0]!r} is not supported")
  kind = meta.get(prefix + "type", "none")
  original = int(meta.get(prefix + "original_context_length", 0)) or None
  if ROPE_FREQS in meta.tensors:
    if kind not in ("none", "llama3"):
      raise hf_io.CheckpointError(
          f"{meta.path}: tensor {ROPE_FREQS!r} together with {prefix}type={kind!r}")
    divisors = _dequantize(meta.tensors[ROPE_FREQS], meta.path).astype(np.float64).reshape(-1)
    return _llama3_from_rope_freqs(divisors, head_dim, theta, original or 8192, meta.path)
  if kind == "none":
    return None
  factor = _float32(meta.get(prefix + "factor"))
  if kind == "linear":
    return RopeScaling("linear", factor=factor)
  if kind == "yarn":
    return RopeScaling(
        "yarn", factor=factor, original_max_position=original or max_position,
        beta_fast=_float32(meta.get(prefix + "yarn_beta_fast", 32.0)),
        beta_slow=_float32(meta.get(prefix + "yarn_beta_slow", 1.0)))
  raise hf_io.CheckpointError(f"{meta.path}: metadata {prefix}type={kind!r} is not supported; "
                              "expected none, linear or yarn")


def _config(meta: _Metadata) -> ModelConfig:
  """ModelConfig from `{arch}.*` metadata; tied embeddings when there is no output.weight."""
  arch = meta.get("general.architecture")
  if arch not in ARCHITECTURES:
    raise hf_io.CheckpointError(f"{meta.path}: general.architecture={arch!r} is not supported; "
                                f"expected one of {ARCHITECTURES}")
  if "token_embd.weight" not in meta.tensors:
    raise hf_io.CheckpointError(f"{meta.path}: tensor 'token_embd.weight' is missing")
  vocab_size = int(meta.get(f"{arch}.vocab_size", meta.tensors["token_embd.weight"].shape[-1]))
  num_tokens = len(meta.get("tokenizer.ggml.tokens", []))
  if num_tokens > vocab_size:
    raise hf_io.CheckpointError(
        f"{meta.path}: tokenizer.ggml.tokens has {num_tokens} tokens but {arch}.vocab_size is "
        f"{vocab_size}: the tokenizer does not match the weights")
  embed_dim = int(meta.get(f"{arch}.embedding_length"))
  num_heads = int(meta.get(f"{arch}.attention.head_count"))
  head_dim = int(meta.get(f"{arch}.attention.key_length", embed_dim // num_heads))
  for key in (f"{arch}.attention.value_length", f"{arch}.rope.dimension_count"):
    if int(meta.get(key, head_dim)) != head_dim:
      raise hf_io.CheckpointError(f"{meta.path}: {key}={meta.get(key)} differs from the head "
                                  f"dimension {head_dim}; only full-width heads are supported")
  theta = _float32(meta.get(f"{arch}.rope.freq_base", 10000.0))
  max_position = int(meta.get(f"{arch}.context_length"))
  scaling = _rope_scaling(meta, arch, head_dim, theta, max_position)
  # Read before the try: a missing field already raises a CheckpointError naming the file.
  num_layers = int(meta.get(f"{arch}.block_count"))
  num_kv_heads = int(meta.get(f"{arch}.attention.head_count_kv", num_heads))
  mlp_dim = int(meta.get(f"{arch}.feed_forward_length"))
  norm_eps = _float32(meta.get(f"{arch}.attention.layer_norm_rms_epsilon"))
  try:
    return ModelConfig(
        family=arch, vocab_size=vocab_size, num_layers=num_layers, embed_dim=embed_dim,
        num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim, mlp_dim=mlp_dim,
        rope_theta=theta, rope_scaling=scaling, norm_eps=norm_eps,
        tie_embeddings="output.weight" not in meta.tensors,
        qkv_bias=arch == "qwen2", qk_norm=arch == "qwen3", max_position=max_position)
  except ValueError as e:  # inconsistent head counts
    raise hf_io.CheckpointError(f"{meta.path}: {e}") from e


def _dequantize(tensor: GGUFTensor, path: pathlib.Path) -> np.ndarray:
  """float32 values of a tensor, in numpy order (outermost dimension first)."""
  try:
    values = gguf.quants.dequantize(tensor.data, tensor.qtype)
  except NotImplementedError as e:
    raise hf_io.CheckpointError(f"{path}: tensor {tensor.name!r} is stored as {tensor.qtype.name}, "
                                "which the gguf package cannot dequantise") from e
  return values.reshape(tensor.shape[::-1])


def load_gguf(path: str | pathlib.Path, dtype: Any = np.float32) -> tuple[ModelConfig, Any]:
  """Reads a llama/qwen2/qwen3 GGUF file into (config, params), dequantising every tensor.

  Args:
    path: the .gguf file.
    dtype: dtype of the returned numpy arrays (float32, 'bfloat16', ...).

  Returns:
    The ModelConfig from the file's metadata and the parameter tree (nested dict of numpy
    arrays; per-layer leaves stacked along a leading L axis).
  """
  path = pathlib.Path(path)
  fields, tensors = read_gguf(path)
  meta = _Metadata(fields, tensors, path)
  cfg = _config(meta)
  by_hf_name = {hf_name(name): t for name, t in tensors.items() if name != ROPE_FREQS}
  heads = {"self_attn.q_proj.weight": cfg.num_heads, "self_attn.k_proj.weight": cfg.num_kv_heads}

  def read(name: str) -> np.ndarray:
    weight = _dequantize(by_hf_name[name], path)
    suffix = name.split(".", 3)[-1]
    if cfg.family == "llama" and suffix in heads:
      weight = unpermute_rows(weight, heads[suffix])
    return weight

  return cfg, hf_io.params_from_tensors(
      cfg, by_hf_name, read, lambda name: f"{path}: tensor {gguf_name(name)!r}", dtype)
