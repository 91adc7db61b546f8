"""BERT encoder (Flax Linen, post-LN) and its loader for HF BERT folders such as all-MiniLM-L6-v2.

The parameter tree mirrors the decoders' conventions (kernels [in, out], layers scanned with a
leading L axis):
```
{'embed': {'embedding': [V, D]}, 'position_embed': {'embedding': [P, D]},
 'type_embed': {'embedding': [Tv, D]}, 'embed_norm': {'scale': [D], 'bias': [D]},
 'layers': {'attn': {'q_proj' | 'k_proj' | 'v_proj' | 'o_proj':
                       {'kernel': [L, D, D], 'bias': [L, D]}},
            'attn_norm': {'scale': [L, D], 'bias': [L, D]},
            'mlp': {'up_proj': {'kernel': [L, D, F], 'bias': [L, F]},
                    'down_proj': {'kernel': [L, F, D], 'bias': [L, D]}},
            'mlp_norm': {'scale': [L, D], 'bias': [L, D]}}}
```
The HF pooler (a tanh dense on [CLS]) is not loaded: sentence embeddings pool the hidden states.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any, Callable, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
TORCH_FILE = "pytorch_model.bin"

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "gelu": lambda x: nn.gelu(x, approximate=False),  # HF "gelu" is the exact erf form.
    "gelu_new": lambda x: nn.gelu(x, approximate=True),
    "gelu_pytorch_tanh": lambda x: nn.gelu(x, approximate=True),
    "relu": nn.relu,
}

Params = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class BertConfig:
  """Shape and numerics of a BERT encoder.

  Attributes:
    vocab_size: V, word-piece vocabulary size.
    hidden_size: D, width of every token representation.
    num_layers: L, transformer layers (scanned).
    num_heads: H attention heads; head_dim Dh = D / H.
    intermediate_size: F, hidden width of each layer's MLP.
    max_position: P, learned absolute positions; inputs longer than this are rejected.
    type_vocab_size: Tv, token-type (segment) embeddings.
    layer_norm_eps: LayerNorm epsilon.
    hidden_act: MLP activation, a key of ACTIVATIONS.
    dtype: compute dtype name ('float32', 'bfloat16'); parameters stay float32.
  """

  vocab_size: int
  hidden_size: int
  num_layers: int
  num_heads: int
  intermediate_size: int
  max_position: int = 512
  type_vocab_size: int = 2
  layer_norm_eps: float = 1e-12
  hidden_act: str = "gelu"
  dtype: str = "float32"

  def __post_init__(self):
    if self.hidden_size % self.num_heads:
      raise ValueError(
          f"hidden_size={self.hidden_size} is not a multiple of num_heads={self.num_heads}")
    if self.hidden_act not in ACTIVATIONS:
      raise ValueError(f"hidden_act={self.hidden_act!r}; expected one of {tuple(ACTIVATIONS)}")

  @property
  def head_dim(self) -> int:
    return self.hidden_size // self.num_heads

  @classmethod
  def from_hf(cls, hf: Mapping[str, Any], source: str = CONFIG_FILE) -> "BertConfig":
    """Reads an HF BERT `config.json` dict; errors name `source` and the offending field."""
    model_type = hf.get("model_type", "bert")
    if model_type != "bert":
      raise ValueError(f"{source}: model_type={model_type!r}; this encoder loads 'bert' only")
    position_type = hf.get("position_embedding_type", "absolute")
    if position_type != "absolute":
      raise ValueError(
          f"{source}: position_embedding_type={position_type!r}; only 'absolute' is supported")
    fields = {
        "vocab_size": "vocab_size", "hidden_size": "hidden_size",
        "num_layers": "num_hidden_layers", "num_heads": "num_attention_heads",
        "intermediate_size": "intermediate_size",
    }
    missing = [hf_name for hf_name in fields.values() if hf_name not in hf]
    if missing:
      raise ValueError(f"{source}: missing required field(s) {missing}")
    optional = {
        "max_position": "max_position_embeddings", "type_vocab_size": "type_vocab_size",
        "layer_norm_eps": "layer_norm_eps", "hidden_act": "hidden_act",
    }
    kwargs = {ours: hf[theirs] for ours, theirs in fields.items()}
    kwargs.update({ours: hf[theirs] for ours, theirs in optional.items() if theirs in hf})
    try:
      return cls(**kwargs)
    except ValueError as e:
      raise ValueError(f"{source}: {e}") from e


class SelfAttention(nn.Module):
  """Bidirectional multi-head attention over the unpadded keys."""

  config: BertConfig

  @nn.compact
  def __call__(self, x: jax.Array, mask: jax.Array) -> jax.Array:
    """x: [B, T, D]; mask: [B, T] bool, True on real tokens. Returns [B, T, D]."""
    cfg = self.config
    dtype = jnp.dtype(cfg.dtype)
    b, t, _ = x.shape
    split = lambda y: y.reshape(b, t, cfg.num_heads, cfg.head_dim)  # B T H Dh
    q = split(nn.Dense(cfg.hidden_size, dtype=dtype, name="q_proj")(x))
    k = split(nn.Dense(cfg.hidden_size, dtype=dtype, name="k_proj")(x))
    v = split(nn.Dense(cfg.hidden_size, dtype=dtype, name="v_proj")(x))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / np.sqrt(cfg.head_dim)
    # `where`, not an additive bias: a row with no real key (batch padding) stays finite.
    logits = jnp.where(mask[:, None, None, :], logits, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(logits, axis=-1).astype(dtype)  # B H T T
    out = jnp.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, t, cfg.hidden_size)
    return nn.Dense(cfg.hidden_size, dtype=dtype, name="o_proj")(out)


class Mlp(nn.Module):
  """Position-wise D -> F -> D feed-forward block."""

  config: BertConfig

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    cfg = self.config
    dtype = jnp.dtype(cfg.dtype)
    h = ACTIVATIONS[cfg.hidden_act](nn.Dense(cfg.intermediate_size, dtype=dtype, name="up_proj")(x))
    return nn.Dense(cfg.hidden_size, dtype=dtype, name="down_proj")(h)


class BertLayer(nn.Module):
  """One post-LN layer: x = LN(x + attn(x)); x = LN(x + mlp(x))."""

  config: BertConfig

  @nn.compact
  def __call__(self, x: jax.Array, mask: jax.Array) -> tuple[jax.Array, None]:
    cfg = self.config
    norm = lambda name: nn.LayerNorm(
        epsilon=cfg.layer_norm_eps, use_fast_variance=False, dtype=jnp.float32, name=name)
    x = norm("attn_norm")(x + SelfAttention(cfg, name="attn")(x, mask))
    x = norm("mlp_norm")(x + Mlp(cfg, name="mlp")(x))
    return x, None  # (carry, per-layer output) for nn.scan


class BertEncoder(nn.Module):
  """Token ids -> contextual token representations (the HF `last_hidden_state`)."""

  config: BertConfig

  @nn.compact
  def __call__(self, token_ids: jax.Array, mask: jax.Array,
               token_type_ids: jax.Array | None = None) -> jax.Array:
    """Encodes right-padded token ids.

    Args:
      token_ids: [B, T] int32.
      mask: [B, T] bool or int, nonzero on real tokens, zero on padding.
      token_type_ids: [B, T] int32 segment ids; zeros when None.

    Returns:
      [B, T, D] float32 hidden states (values at padded positions are meaningless).
    """
    cfg = self.config
    _, t = token_ids.shape
    if t > cfg.max_position:
      raise ValueError(f"sequence length {t} exceeds max_position={cfg.max_position}")
    if token_type_ids is None:
      token_type_ids = jnp.zeros_like(token_ids)
    mask = mask.astype(bool)
    x = (nn.Embed(cfg.vocab_size, cfg.hidden_size, name="embed")(token_ids)
         + nn.Embed(cfg.max_position, cfg.hidden_size, name="position_embed")(jnp.arange(t))[None]
         + nn.Embed(cfg.type_vocab_size, cfg.hidden_size, name="type_embed")(token_type_ids))
    x = nn.LayerNorm(
        epsilon=cfg.layer_norm_eps, use_fast_variance=False, name="embed_norm")(x)  # B T D
    layers = nn.scan(BertLayer, variable_axes={"params": 0}, split_rngs={"params": True},
                     in_axes=nn.broadcast, length=cfg.num_layers)
    x, _ = layers(cfg, name="layers")(x, mask)
    return x.astype(jnp.float32)


# ---- loading an HF BERT folder ----

def read_json(path: pathlib.Path) -> dict[str, Any]:
  """A JSON object from `path`; malformed content is reported with the file's name."""
  try:
    value = json.loads(path.read_text())
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}: not valid JSON ({e})") from e
  if not isinstance(value, dict):
    raise ValueError(f"{path}: expected a JSON object, got {type(value).__name__}")
  return value


def read_config(model_dir: str | pathlib.Path) -> BertConfig:
  """BertConfig from `model_dir/config.json`."""
  path = pathlib.Path(model_dir) / CONFIG_FILE
  if not path.is_file():
    raise FileNotFoundError(f"BERT config not found: {path}")
  return BertConfig.from_hf(read_json(path), source=str(path))


def read_checkpoint(model_dir: str | pathlib.Path) -> tuple[dict[str, np.ndarray], pathlib.Path]:
  """All tensors of the folder's weights file as numpy, preferring safetensors.

  `pytorch_model.bin` is read (with torch, weights only) only when no safetensors file exists.
  """
  model_dir = pathlib.Path(model_dir)
  safetensors_path, torch_path = model_dir / SAFETENSORS_FILE, model_dir / TORCH_FILE
  if safetensors_path.is_file():
    from safetensors.numpy import load_file  # pylint: disable=g-import-not-at-top
    return load_file(str(safetensors_path)), safetensors_path
  if torch_path.is_file():
    try:
      import torch  # pylint: disable=g-import-not-at-top
    except ImportError as e:
      raise ImportError(f"{torch_path} is a torch pickle and torch is not installed; "
                        f"convert it to {SAFETENSORS_FILE} or install torch") from e
    state = torch.load(str(torch_path), map_location="cpu", weights_only=True)
    return {k: v.float().numpy() if v.is_floating_point() else v.numpy()
            for k, v in state.items()}, torch_path
  raise FileNotFoundError(f"no weights in {model_dir}: expected {SAFETENSORS_FILE} or {TORCH_FILE}")


def convert_hf_params(tensors: Mapping[str, np.ndarray], cfg: BertConfig,
                      source: str = SAFETENSORS_FILE) -> Params:
  """Maps HF BertModel tensors (optionally under a 'bert.' prefix) onto this module's tree.

  Raises:
    ValueError naming `source` and the tensor when one is missing or has the wrong shape.
  """
  prefix = "bert." if "bert.embeddings.word_embeddings.weight" in tensors else ""
  d, f, l = cfg.hidden_size, cfg.intermediate_size, cfg.num_layers

  def get(name: str, shape: tuple[int, ...], transpose: bool = False) -> np.ndarray:
    key = prefix + name
    if key not in tensors:
      raise ValueError(f"{source}: missing tensor {key!r}")
    value = np.asarray(tensors[key], dtype=np.float32)
    expected = shape[::-1] if transpose else shape
    if value.shape != expected:
      raise ValueError(f"{source}: tensor {key!r} has shape {value.shape}, config.json implies "
                       f"{expected}")
    return value.T if transpose else value

  def stacked(name: str, shape: tuple[int, ...], transpose: bool = False) -> np.ndarray:
    return np.stack([get(f"encoder.layer.{i}.{name}", shape, transpose) for i in range(l)])

  def dense(name: str, d_in: int, d_out: int) -> Params:
    return {"kernel": stacked(f"{name}.weight", (d_in, d_out), transpose=True),
            "bias": stacked(f"{name}.bias", (d_out,))}

  def layer_norm(name: str, per_layer: bool) -> Params:
    read = stacked if per_layer else get
    return {"scale": read(f"{name}.weight", (d,)), "bias": read(f"{name}.bias", (d,))}

  return {
      "embed": {"embedding": get("embeddings.word_embeddings.weight", (cfg.vocab_size, d))},
      "position_embed": {
          "embedding": get("embeddings.position_embeddings.weight", (cfg.max_position, d))},
      "type_embed": {
          "embedding": get("embeddings.token_type_embeddings.weight", (cfg.type_vocab_size, d))},
      "embed_norm": layer_norm("embeddings.LayerNorm", per_layer=False),
      "layers": {
          "attn": {ours: dense(f"attention.{theirs}", d, d) for ours, theirs in (
              ("q_proj", "self.query"), ("k_proj", "self.key"), ("v_proj", "self.value"),
              ("o_proj", "output.dense"))},
          "attn_norm": layer_norm("attention.output.LayerNorm", per_layer=True),
          "mlp": {"up_proj": dense("intermediate.dense", d, f),
                  "down_proj": dense("output.dense", f, d)},
          "mlp_norm": layer_norm("output.LayerNorm", per_layer=True),
      },
  }


def load_bert(model_dir: str | pathlib.Path, dtype: str = "float32") -> tuple[BertConfig, Params]:
  """Config and parameters of the HF BERT folder `model_dir`.

  Args:
    model_dir: folder with `config.json` and `model.safetensors` (or `pytorch_model.bin`).
    dtype: compute dtype of the returned config.

  Returns:
    (config, params) with params the `BertEncoder` tree as float32 numpy arrays.
  """
  model_dir = pathlib.Path(model_dir)
  if not model_dir.is_dir():
    raise FileNotFoundError(f"BERT model folder not found: {model_dir}")
  cfg = dataclasses.replace(read_config(model_dir), dtype=dtype)
  tensors, path = read_checkpoint(model_dir)
  return cfg, convert_hf_params(tensors, cfg, source=str(path))
