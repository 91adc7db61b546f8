"""HF safetensors folders <-> memex_jax configs and parameter trees (llama, qwen2, qwen3).

A folder holds `config.json` and either `model.safetensors` or shards listed by
`model.safetensors.index.json`. Torch Linear weights are [out, in]; our kernels are [in, out].
Every per-layer tensor `model.layers.{i}.*` is stacked along a leading L axis.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import pathlib
from typing import Any, Callable, Iterable, Mapping

import ml_dtypes  # registers 'bfloat16' with numpy
import numpy as np
import safetensors
import safetensors.numpy

from memex_jax.models.config import FAMILIES, ModelConfig, RopeScaling

Params = dict[str, Any]
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
TOKENIZER_FILE = "tokenizer.json"
ARCHITECTURE_CLASSES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                        "qwen3": "Qwen3ForCausalLM"}
# Keys of a rope_parameters dict that each rope type may carry (all others would change the math).
_ROPE_KEYS = {
    "default": set(),
    "linear": {"factor"},
    "llama3": {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"},
    "yarn": {"factor", "original_max_position_embeddings", "beta_fast", "beta_slow",
             "attention_factor", "mscale", "mscale_all_dim", "truncate"},
}
_REQUIRED = object()


class CheckpointError(ValueError):
  """A checkpoint, config or tokenizer that does not describe a model memex_jax runs.

  The message always names the file and the field or tensor at fault.
  """


def numpy_dtype(dtype: Any) -> np.dtype:
  """np.float32, 'bfloat16', jnp.bfloat16, ... -> a floating numpy dtype."""
  dt = np.dtype(dtype)
  if dt != np.dtype(ml_dtypes.bfloat16) and not np.issubdtype(dt, np.floating):
    raise ValueError(f"dtype={dtype!r} is not a floating-point type")
  return dt


# --- config.json ------------------------------------------------------------------------------


def _rope_scaling_from_hf(rope: Mapping[str, Any], max_position: int,
                          source: str) -> RopeScaling | None:
  """The RopeScaling for an HF rope_parameters / rope_scaling dict (None for plain RoPE)."""
  rope_type = rope.get("rope_type", rope.get("type", "default"))
  if rope_type not in _ROPE_KEYS:
    raise CheckpointError(f"{source}: rope_parameters.rope_type={rope_type!r} is not supported; "
                          f"expected one of {tuple(_ROPE_KEYS)}")
  extra = set(rope) - _ROPE_KEYS[rope_type] - {"rope_type", "type", "rope_theta"}
  if rope.get("partial_rotary_factor", 1.0) == 1.0:
    extra.discard("partial_rotary_factor")
  if extra:
    raise CheckpointError(f"{source}: rope_parameters field(s) {sorted(extra)} are not supported "
                          f"for rope_type={rope_type!r}")

  def field(key: str, default: Any = _REQUIRED) -> Any:
    if rope.get(key) is not None:
      return rope[key]
    if default is _REQUIRED:
      raise CheckpointError(f"{source}: rope_parameters.{key} is required for {rope_type!r} RoPE")
    return default

  if rope_type == "default":
    return None
  if rope_type == "linear":
    return RopeScaling("linear", factor=float(field("factor")))
  if rope_type == "llama3":
    return RopeScaling(
        "llama3", factor=float(field("factor")), low_freq_factor=float(field("low_freq_factor")),
        high_freq_factor=float(field("high_freq_factor")),
        original_max_position=int(field("original_max_position_embeddings")))
  original = int(field("original_max_position_embeddings", max_position))
  factor = float(field("factor", max_position / original))
  attention_factor = field("attention_factor", None)
  mscale, mscale_all_dim = field("mscale", None), field("mscale_all_dim", None)
  if attention_factor is None and mscale and mscale_all_dim and factor > 1:
    # DeepSeek-style ratio of two mscales; stored explicitly so the model needs no extra fields.
    attention_factor = (0.1 * mscale * math.log(factor) + 1) / (
        0.1 * mscale_all_dim * math.log(factor) + 1)
  return RopeScaling(
      "yarn", factor=factor, original_max_position=original,
      beta_fast=float(field("beta_fast", 32.0)), beta_slow=float(field("beta_slow", 1.0)),
      attention_factor=None if attention_factor is None else float(attention_factor),
      truncate=bool(field("truncate", True)))


def config_from_hf(hf: Mapping[str, Any], source: str = CONFIG_FILE) -> ModelConfig:
  """A ModelConfig from a transformers config dict (config.json of llama, qwen2 or qwen3).

  Args:
    hf: the parsed config.json.
    source: the file it came from, for error messages.
  """

  def field(key: str, default: Any = _REQUIRED) -> Any:
    if hf.get(key) is not None:
      return hf[key]
    if default is _REQUIRED:
      raise CheckpointError(f"{source}: missing field {key!r}")
    return default

  family = field("model_type")
  if family not in FAMILIES:
    raise CheckpointError(f"{source}: model_type={family!r} is not supported; expected one of "
                          f"{FAMILIES}")
  # Variants our decoder does not implement: refuse them rather than run a different model.
  unsupported = {"hidden_act": "silu", "mlp_bias": False, "use_sliding_window": False}
  if family != "qwen2":
    unsupported["attention_bias"] = False
  for key, supported in unsupported.items():
    if field(key, supported) != supported:
      raise CheckpointError(f"{source}: {key}={hf[key]!r} is not supported (only {supported!r})")
  rope = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
  if any(isinstance(v, Mapping) for v in rope.values()):
    raise CheckpointError(f"{source}: per-layer-type rope_parameters are not supported")
  num_heads = int(field("num_attention_heads"))
  embed_dim = int(field("hidden_size"))
  max_position = int(field("max_position_embeddings"))
  try:
    return ModelConfig(
        family=family, vocab_size=int(field("vocab_size")),
        num_layers=int(field("num_hidden_layers")), embed_dim=embed_dim, num_heads=num_heads,
        num_kv_heads=int(field("num_key_value_heads", num_heads)),
        head_dim=int(field("head_dim", embed_dim // num_heads)),
        mlp_dim=int(field("intermediate_size")),
        rope_theta=float(rope.get("rope_theta") or field("rope_theta", 10000.0)),
        rope_scaling=_rope_scaling_from_hf(rope, max_position, source),
        norm_eps=float(field("rms_norm_eps", 1e-6)),
        tie_embeddings=bool(field("tie_word_embeddings", False)),
        qkv_bias=family == "qwen2", qk_norm=family == "qwen3", max_position=max_position)
  except ValueError as e:
    raise CheckpointError(f"{source}: {e}") from e


def config_to_hf(cfg: ModelConfig) -> dict[str, Any]:
  """The transformers config.json dict describing `cfg` (inverse of config_from_hf)."""
  if cfg.qkv_bias != (cfg.family == "qwen2") or cfg.qk_norm != (cfg.family == "qwen3"):
    raise ValueError(f"{cfg.family} with qkv_bias={cfg.qkv_bias}, qk_norm={cfg.qk_norm} has no "
                     "transformers equivalent")
  rope: dict[str, Any] = {"rope_type": "default", "rope_theta": cfg.rope_theta}
  s = cfg.rope_scaling
  if s is not None and s.rope_type != "default":
    rope.update(rope_type=s.rope_type, factor=s.factor)
    if s.rope_type == "llama3":
      rope.update(low_freq_factor=s.low_freq_factor, high_freq_factor=s.high_freq_factor,
                  original_max_position_embeddings=s.original_max_position)
    if s.rope_type == "yarn":
      rope.update(original_max_position_embeddings=s.original_max_position,
                  beta_fast=s.beta_fast, beta_slow=s.beta_slow, truncate=s.truncate)
      if s.attention_factor is not None:
        rope["attention_factor"] = s.attention_factor
  hf = {
      "architectures": [ARCHITECTURE_CLASSES[cfg.family]], "model_type": cfg.family,
      "vocab_size": cfg.vocab_size, "hidden_size": cfg.embed_dim,
      "intermediate_size": cfg.mlp_dim, "num_hidden_layers": cfg.num_layers,
      "num_attention_heads": cfg.num_heads, "num_key_value_heads": cfg.num_kv_heads,
      "head_dim": cfg.head_dim, "hidden_act": "silu", "max_position_embeddings": cfg.max_position,
      "rms_norm_eps": cfg.norm_eps, "tie_word_embeddings": cfg.tie_embeddings,
      "rope_parameters": rope, "dtype": cfg.param_dtype,
  }
  if cfg.family == "llama":
    hf.update(attention_bias=False, mlp_bias=False)
  if cfg.family == "qwen3":
    hf["attention_bias"] = False
  if cfg.family in ("qwen2", "qwen3"):
    hf.update(use_sliding_window=False, layer_types=["full_attention"] * cfg.num_layers)
  return hf


# --- tensors ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TensorSpec:
  """One HF tensor and where it lives in our tree.

  Attributes:
    name: HF name; per-layer names contain '{i}'.
    path: keys into the parameter tree.
    shape: HF shape of one tensor (one layer's, for per-layer tensors).
    transpose: HF stores it [out, in]; our kernel is [in, out].
  """

  name: str
  path: tuple[str, ...]
  shape: tuple[int, ...]
  transpose: bool = False

  @property
  def per_layer(self) -> bool:
    return "{i}" in self.name


def tensor_specs(cfg: ModelConfig) -> list[TensorSpec]:
  """Every tensor an HF checkpoint of `cfg` holds, in a fixed order."""
  d, f, v = cfg.embed_dim, cfg.mlp_dim, cfg.vocab_size
  q, kv = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
  pre = "model.layers.{i}."
  specs = [TensorSpec("model.embed_tokens.weight", ("embed", "embedding"), (v, d)),
           TensorSpec(pre + "input_layernorm.weight", ("layers", "attn_norm", "scale"), (d,))]
  for proj, width in (("q_proj", q), ("k_proj", kv), ("v_proj", kv)):
    specs.append(TensorSpec(f"{pre}self_attn.{proj}.weight", ("layers", "attn", proj, "kernel"),
                            (width, d), True))
    if cfg.qkv_bias:
      specs.append(TensorSpec(f"{pre}self_attn.{proj}.bias", ("layers", "attn", proj, "bias"),
                              (width,)))
  specs.append(TensorSpec(pre + "self_attn.o_proj.weight", ("layers", "attn", "o_proj", "kernel"),
                          (d, q), True))
  if cfg.qk_norm:
    specs += [TensorSpec(f"{pre}self_attn.{n}.weight", ("layers", "attn", n, "scale"),
                         (cfg.head_dim,)) for n in ("q_norm", "k_norm")]
  specs += [
      TensorSpec(pre + "post_attention_layernorm.weight", ("layers", "mlp_norm", "scale"), (d,)),
      TensorSpec(pre + "mlp.gate_proj.weight", ("layers", "mlp", "gate_proj", "kernel"), (f, d),
                 True),
      TensorSpec(pre + "mlp.up_proj.weight", ("layers", "mlp", "up_proj", "kernel"), (f, d), True),
      TensorSpec(pre + "mlp.down_proj.weight", ("layers", "mlp", "down_proj", "kernel"), (d, f),
                 True),
      TensorSpec("model.norm.weight", ("final_norm", "scale"), (d,))]
  if not cfg.tie_embeddings:
    specs.append(TensorSpec("lm_head.weight", ("lm_head", "kernel"), (v, d), True))
  return specs


def _names(spec: TensorSpec, cfg: ModelConfig) -> list[str]:
  return [spec.name.format(i=i) for i in range(cfg.num_layers)] if spec.per_layer else [spec.name]


def _ignorable(name: str, cfg: ModelConfig) -> bool:
  # Non-persistent RoPE buffers of old checkpoints, and a tied head saved twice.
  return name.endswith("rotary_emb.inv_freq") or (cfg.tie_embeddings and name == "lm_head.weight")


def params_from_tensors(cfg: ModelConfig, names: Iterable[str], read: Callable[[str], np.ndarray],
                        describe: Callable[[str], str], dtype: Any = np.float32) -> Params:
  """Builds our parameter tree from HF-named tensors, checking names and shapes.

  Args:
    cfg: the model the tensors must describe.
    names: every tensor name the checkpoint holds.
    read: HF name -> array in HF layout.
    describe: HF name -> "file: tensor 'name'" for error messages.
    dtype: dtype of the returned arrays.
  """
  dtype = numpy_dtype(dtype)
  specs = tensor_specs(cfg)
  expected = {n for s in specs for n in _names(s, cfg)}
  available = set(names)
  unexpected = sorted(n for n in available - expected if not _ignorable(n, cfg))
  if unexpected:
    raise CheckpointError(f"{describe(unexpected[0])} is not part of a {cfg.family} model with "
                          f"{cfg.num_layers} layers ({len(unexpected)} unexpected tensors)")
  params: Params = {}
  for spec in specs:
    arrays = []
    for name in _names(spec, cfg):
      if name not in available:
        raise CheckpointError(f"{describe(name)} is missing")
      array = np.asarray(read(name))
      if array.shape != spec.shape:
        raise CheckpointError(f"{describe(name)} has shape {array.shape}; the config implies "
                              f"{spec.shape}")
      arrays.append((array.T if spec.transpose else array).astype(dtype))
    node = params
    for key in spec.path[:-1]:
      node = node.setdefault(key, {})
    node[spec.path[-1]] = np.stack(arrays) if spec.per_layer else arrays[0]
  return params


def tensors_from_params(cfg: ModelConfig, params: Params) -> dict[str, np.ndarray]:
  """Our parameter tree -> HF-named numpy tensors (inverse of params_from_tensors)."""
  tensors = {}
  for spec in tensor_specs(cfg):
    node = params
    for depth, key in enumerate(spec.path):
      if not isinstance(node, Mapping) or key not in node:
        raise KeyError(f"params has no {'/'.join(spec.path[:depth + 1])} (needed for {spec.name})")
      node = node[key]
    stacked = np.asarray(node)
    want = ((cfg.num_layers,) if spec.per_layer else ()) + (
        spec.shape[::-1] if spec.transpose else spec.shape)
    if stacked.shape != want:
      raise ValueError(f"params {'/'.join(spec.path)} has shape {stacked.shape}; expected {want}")
    for i, name in enumerate(_names(spec, cfg)):
      array = stacked[i] if spec.per_layer else stacked
      tensors[name] = np.ascontiguousarray(array.T if spec.transpose else array)
  return tensors


def torch_model(cfg: ModelConfig, params: Params) -> Any:
  """A transformers CausalLM (torch, float32, eval mode) holding exactly `params`.

  The reference of the parity tests and the CPU benches; torch is a test-only dependency, so it
  is imported here, on first use.
  """
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  hf_config = transformers.AutoConfig.for_model(**config_to_hf(cfg))
  model = transformers.AutoModelForCausalLM.from_config(hf_config, dtype=torch.float32)
  model.load_state_dict({k: torch.from_numpy(v) for k, v in tensors_from_params(cfg, params).items()},
                        strict=False)
  model.tie_weights()
  return model.eval()


# --- folders ----------------------------------------------------------------------------------


def read_config(folder: str | pathlib.Path) -> ModelConfig:
  """The ModelConfig of an HF folder's config.json."""
  path = pathlib.Path(folder) / CONFIG_FILE
  if not path.is_file():
    raise FileNotFoundError(f"{path} not found: not an HF model folder")
  try:
    hf = json.loads(path.read_text())
  except json.JSONDecodeError as e:
    raise CheckpointError(f"{path}: not valid JSON ({e})") from e
  return config_from_hf(hf, str(path))


def _weight_files(folder: pathlib.Path) -> dict[str, pathlib.Path]:
  """HF tensor name -> the safetensors file holding it."""
  index = folder / INDEX_FILE
  if index.is_file():
    try:
      weight_map = json.loads(index.read_text())["weight_map"]
    except (json.JSONDecodeError, KeyError) as e:
      raise CheckpointError(f"{index}: no readable 'weight_map' ({e})") from e
    files = {name: folder / shard for name, shard in weight_map.items()}
    for path in set(files.values()):
      if not path.is_file():
        raise CheckpointError(f"{index}: shard {path.name!r} is missing from {folder}")
    return files
  single = folder / WEIGHTS_FILE
  if not single.is_file():
    raise FileNotFoundError(f"{folder} has neither {WEIGHTS_FILE} nor {INDEX_FILE}")
  with safetensors.safe_open(str(single), "numpy") as f:
    return {name: single for name in f.keys()}


def check_tokenizer(folder: str | pathlib.Path, cfg: ModelConfig) -> None:
  """Raises CheckpointError if the folder's tokenizer.json has ids the embedding lacks."""
  path = pathlib.Path(folder) / TOKENIZER_FILE
  if not path.is_file():
    return
  spec = json.loads(path.read_text())
  vocab = (spec.get("model") or {}).get("vocab") or {}
  ids = list(vocab.values()) if isinstance(vocab, Mapping) else list(range(len(vocab)))
  ids += [t["id"] for t in spec.get("added_tokens") or []]
  if ids and max(ids) >= cfg.vocab_size:
    raise CheckpointError(f"{path}: token id {max(ids)} does not fit the model's vocab_size="
                          f"{cfg.vocab_size}: the tokenizer does not match the weights")


def load_hf(folder: str | pathlib.Path, dtype: Any = np.float32) -> tuple[ModelConfig, Params]:
  """Reads an HF folder (config.json + safetensors, possibly sharded) into (config, params)."""
  folder = pathlib.Path(folder)
  if not folder.is_dir():
    raise FileNotFoundError(f"{folder} is not a directory")
  cfg = read_config(folder)
  check_tokenizer(folder, cfg)
  files = _weight_files(folder)
  with contextlib.ExitStack() as stack:
    handles = {path: stack.enter_context(safetensors.safe_open(str(path), "numpy"))
               for path in set(files.values())}
    return cfg, params_from_tensors(
        cfg, files, lambda name: handles[files[name]].get_tensor(name),
        lambda name: f"{files.get(name, folder / WEIGHTS_FILE)}: tensor {name!r}", dtype)


def save_hf(folder: str | pathlib.Path, cfg: ModelConfig, params: Params,
            extra_config: Mapping[str, Any] | None = None) -> pathlib.Path:
  """Writes config.json + model.safetensors that transformers' from_pretrained loads.

  Args:
    folder: created if missing.
    cfg: the model's config.
    params: our parameter tree (numpy or jax arrays); saved in their own dtype.
    extra_config: more config.json fields (e.g. bos_token_id, eos_token_id).
  """
  folder = pathlib.Path(folder)
  folder.mkdir(parents=True, exist_ok=True)
  tensors = tensors_from_params(cfg, params)
  hf = config_to_hf(cfg) | {"dtype": str(next(iter(tensors.values())).dtype)}
  (folder / CONFIG_FILE).write_text(json.dumps(hf | dict(extra_config or {}), indent=2) + "\n")
  safetensors.numpy.save_file(tensors, str(folder / WEIGHTS_FILE), metadata={"format": "pt"})
  return folder
