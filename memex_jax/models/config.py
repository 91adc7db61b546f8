"""One config dataclass for the llama, qwen2 and qwen3 decoder families."""

from __future__ import annotations

import dataclasses
from typing import Any

FAMILIES = ("llama", "qwen2", "qwen3")
QUANT_MODES = ("none", "int4_qat", "int4_serve")
ROPE_TYPES = ("default", "linear", "llama3", "yarn")
REMAT_SAVES = ("nothing", "dots")
MATMUL_DTYPES = (None, "float32", "bfloat16")


@dataclasses.dataclass(frozen=True)
class RopeScaling:
  """RoPE frequency scaling, as the HF `rope_scaling` dict describes it.

  Attributes:
    rope_type: one of ROPE_TYPES.
    factor: context extension factor (linear, llama3, yarn).
    low_freq_factor, high_freq_factor: llama3 band edges.
    original_max_position: pre-extension context length (llama3, yarn).
    beta_fast, beta_slow: yarn ramp bounds in rotations.
    attention_factor: yarn logit scale; None means 0.1 * ln(factor) + 1.
    truncate: yarn rounds the correction range to whole dimensions.
  """

  rope_type: str = "default"
  factor: float = 1.0
  low_freq_factor: float = 1.0
  high_freq_factor: float = 4.0
  original_max_position: int = 8192
  beta_fast: float = 32.0
  beta_slow: float = 1.0
  attention_factor: float | None = None
  truncate: bool = True

  def __post_init__(self):
    if self.rope_type not in ROPE_TYPES:
      raise ValueError(f"rope_scaling.rope_type={self.rope_type!r}; expected one of {ROPE_TYPES}")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Shape and numerics of a decoder-only transformer.

  Attributes:
    family: 'llama' (SmolLM2, Llama-3), 'qwen2' (q/k/v biases) or 'qwen3' (q/k RMSNorm).
    vocab_size: V.
    num_layers: L, scanned.
    embed_dim: D.
    num_heads: H query heads.
    num_kv_heads: K key/value heads (GQA: H % K == 0).
    head_dim: Dh.
    mlp_dim: F, SwiGLU hidden width.
    rope_theta: RoPE base.
    rope_scaling: frequency scaling variant, None for plain RoPE.
    norm_eps: RMSNorm epsilon.
    tie_embeddings: the LM head reuses the embedding matrix.
    qkv_bias: q/k/v projections carry a bias (qwen2).
    qk_norm: per-head RMSNorm on q and k before RoPE (qwen3).
    max_position: the model's context window.
    dtype: activation/compute dtype name ('float32', 'bfloat16').
    param_dtype: parameter storage dtype name.
    matmul_dtype: None, or the dtype the operands of the big products are cast to, with float32
      accumulation: the projections, the tiled attention's score and value products, and the
      LM head of teacher-forced logprobs, forward and backward. 'bfloat16' runs them on the
      CPU's AMX units (4-5x float32's matmul here); activations, norms and softmaxes keep
      `dtype`. It rounds every product's inputs, so logprobs move (`bench.cpu_vs_torch` measures
      by how much on real text); off by default, and on only where rollout and learner
      logprobs need not agree bit for bit or TIS covers the gap.
    quant: 'none', 'int4_qat' (int4 weights in the forward, float grads) or 'int4_serve'
      (stored int4 values + scales and offsets, for the sampler); see quant.py.
    int4_group: input channels per int4 group (one scale and offset per group and output
      channel); must divide every projection's input width. 32 is lossless for SmolLM2.
    remat: rematerialise each layer in the backward pass.
    remat_saves: with remat, what each layer keeps from its forward: 'nothing' (least memory)
      or 'dots' (the projection matmul outputs: the backward recomputes only attention and the
      elementwise ops, for ~7 saved [B T width] arrays per layer).
    attention_block: with a KV cache, a prefill of at least two blocks of ids attends in tiles
      of this many queries and keys, skipping the tiles past each query block's last position
      (blocked_attention.py: ~2x faster at 2,048 ids on the CPU; accelerators keep XLA's
      attention); 0 = one masked attention. SmolLM2's prefill of 2,048 ids on the CPU: 396
      tokens/s with 256, 354 with 128, 389 with 512 (bfloat16 products: 958, 621, 810).
    train_attention_block: without a cache (training rows, teacher-forced logprobs), rows of at
      least two blocks attend in tiles of this many ids, forward and backward, so no [B H T T]
      tensor is made (SmolLM2 at 3,072 ids on the CPU: the train step 1.4-1.7x faster with
      256 over three runs, 1.2x with 128, 1.0x with 512); 0 = one masked attention.
    no_grad_layers: without a cache, the lowest this many layers pass no gradient: they run
      forward only (no remat, no backward), so a train step costs about the forward plus the
      backward of the layers above (the embedding is then trained through the tied head only).
      The forward, and so every logprob, is unchanged. A learning-speed choice for the CPU;
      weight decay, where the optimizer applies it, still acts on those layers. 0 = off.
  """

  family: str
  vocab_size: int
  num_layers: int
  embed_dim: int
  num_heads: int
  num_kv_heads: int
  head_dim: int
  mlp_dim: int
  rope_theta: float = 10000.0
  rope_scaling: RopeScaling | None = None
  norm_eps: float = 1e-5
  tie_embeddings: bool = False
  qkv_bias: bool = False
  qk_norm: bool = False
  max_position: int = 8192
  dtype: str = "float32"
  param_dtype: str = "float32"
  matmul_dtype: str | None = None
  quant: str = "none"
  int4_group: int = 32
  remat: bool = False
  remat_saves: str = "nothing"
  attention_block: int = 256
  train_attention_block: int = 256
  no_grad_layers: int = 0

  def __post_init__(self):
    if self.family not in FAMILIES:
      raise ValueError(f"unknown architecture family {self.family!r}; expected one of {FAMILIES}")
    if self.remat_saves not in REMAT_SAVES:
      raise ValueError(f"remat_saves={self.remat_saves!r}; expected one of {REMAT_SAVES}")
    if self.matmul_dtype not in MATMUL_DTYPES:
      raise ValueError(f"matmul_dtype={self.matmul_dtype!r}; expected one of {MATMUL_DTYPES}")
    if self.quant not in QUANT_MODES:
      raise ValueError(f"quant={self.quant!r}; expected one of {QUANT_MODES}")
    widths = (self.embed_dim, self.num_heads * self.head_dim, self.mlp_dim)
    if self.quant != "none" and (self.int4_group < 1 or any(w % self.int4_group for w in widths)):
      raise ValueError(f"int4_group={self.int4_group} must divide every projection's input width "
                       f"{widths}")
    for name in ("attention_block", "train_attention_block"):
      if getattr(self, name) < 0:
        raise ValueError(f"{name}={getattr(self, name)} must be >= 0 (0 = off)")
    if not 0 <= self.no_grad_layers < self.num_layers:
      raise ValueError(f"no_grad_layers={self.no_grad_layers} must be in [0, num_layers="
                       f"{self.num_layers})")
    if self.num_heads % self.num_kv_heads:
      raise ValueError(
          f"num_heads={self.num_heads} is not a multiple of num_kv_heads={self.num_kv_heads}")

  def replace(self, **changes: Any) -> "ModelConfig":
    return dataclasses.replace(self, **changes)

  @property
  def num_params(self) -> int:
    """All parameters, the LM head counted once when tied."""
    d, h, k, dh, f = self.embed_dim, self.num_heads, self.num_kv_heads, self.head_dim, self.mlp_dim
    attn = d * h * dh * 2 + d * k * dh * 2
    if self.qkv_bias:
      attn += (h + 2 * k) * dh
    if self.qk_norm:
      attn += 2 * dh
    per_layer = attn + 3 * d * f + 2 * d
    head = 0 if self.tie_embeddings else d * self.vocab_size
    return self.num_layers * per_layer + self.vocab_size * d + d + head


def smollm2_135m(**overrides: Any) -> ModelConfig:
  """SmolLM2-135M(-Instruct): llama family, 30 layers, tied head, 8K window."""
  cfg = ModelConfig(
      family="llama", vocab_size=49152, num_layers=30, embed_dim=576, num_heads=9,
      num_kv_heads=3, head_dim=64, mlp_dim=1536, rope_theta=100000.0, norm_eps=1e-5,
      tie_embeddings=True, max_position=8192)
  return cfg.replace(**overrides)


def qwen2_5_0_5b(**overrides: Any) -> ModelConfig:
  """Qwen2.5-0.5B shapes (the benchmark model; random init)."""
  cfg = ModelConfig(
      family="qwen2", vocab_size=151936, num_layers=24, embed_dim=896, num_heads=14,
      num_kv_heads=2, head_dim=64, mlp_dim=4864, rope_theta=1000000.0, norm_eps=1e-6,
      tie_embeddings=True, qkv_bias=True, max_position=32768)
  return cfg.replace(**overrides)


def tiny(family: str = "llama", **overrides: Any) -> ModelConfig:
  """A few-thousand-parameter model of any family, for tests."""
  cfg = ModelConfig(
      family=family, vocab_size=256, num_layers=2, embed_dim=64, num_heads=4, num_kv_heads=2,
      head_dim=16, mlp_dim=128, rope_theta=10000.0, norm_eps=1e-6,
      tie_embeddings=family == "llama", qkv_bias=family == "qwen2", qk_norm=family == "qwen3",
      max_position=512)
  return cfg.replace(**overrides)
