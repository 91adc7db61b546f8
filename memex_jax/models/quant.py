"""Int4 weights: AQT quantization-aware training and the stored int4 serving form.

Training (`quant='int4_qat'`): every attention and MLP projection runs as an AQT dot whose
weight operand is fake-quantized to int4 with one scale per output channel; activations and all
gradients stay float (the Memex recipe: int4 forward, float gradient accumulation). The
parameter tree is the float one, so a float checkpoint trains under QAT unchanged.

Serving (`quant='int4_serve'`): each projection kernel [.., In, Out] becomes
`kernel_int4` [.., In, Out] int4 and `kernel_scale` [.., 1, Out], computed with the same
numerics as AQT's forward, so the sampler and the QAT learner see one policy.
"""

from __future__ import annotations

import warnings
from typing import Any

import jax
import jax.numpy as jnp

# aqtp 0.9.0 calls jnp.promote_types on arrays; jax 0.10/0.11 warn that it will become an error.
warnings.filterwarnings("ignore", message=".*promote_types.*", category=DeprecationWarning)

from aqt.jax.v2 import config as aqt_config  # pylint: disable=g-import-not-at-top
from aqt.jax.v2 import utils as aqt_utils  # pylint: disable=g-import-not-at-top
from aqt.jax.v2.flax import aqt_flax  # pylint: disable=g-import-not-at-top

INT4_MAX = 7.0
# AQT's symmetric int4 maps absmax to the bucket edge 7.5 and clips to [-7, 7].
INT4_BUCKET_EDGE = 7.5
QUANTIZED_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                         "down_proj")


def int4_weight_config() -> aqt_config.DotGeneral:
  """AQT config: int4 weights (rhs) in the forward pass; activations and gradients float."""
  cfg = aqt_config.default_unquantized_config()
  aqt_config.set_bits(cfg, fwd_lhs_bit=None, fwd_rhs_bit=4, dlhs_lhs_bit=None,
                      dlhs_rhs_bit=None, drhs_lhs_bit=None, drhs_rhs_bit=None)
  return cfg


def qat_dot_general() -> aqt_flax.AqtDotGeneral:
  """A Linen dot_general module for `x @ kernel` with the kernel fake-quantized to int4."""
  # AQT config objects are not hashable: build one per module instead of passing it statically.
  return aqt_flax.AqtDotGeneral(int4_weight_config(), rhs_quant_mode=aqt_utils.QuantMode.TRAIN,
                                lhs_quant_mode=aqt_utils.QuantMode.TRAIN,
                                # Deterministic rounding: no rng stream needed at apply time.
                                prng_name=None)


def quantize_int4(kernel: jax.Array) -> tuple[jax.Array, jax.Array]:
  """kernel [.., In, Out] float -> (values [.., In, Out] int4, scale [.., 1, Out] float32)."""
  kernel = kernel.astype(jnp.float32)
  scale = jnp.max(jnp.abs(kernel), axis=-2, keepdims=True) / INT4_BUCKET_EDGE
  scale = jnp.where(scale == 0, 1.0, scale)
  values = jnp.round(jnp.clip(kernel / scale, -INT4_MAX, INT4_MAX))
  return values.astype(jnp.int4), scale


def fake_quantize_int4(kernel: jax.Array) -> jax.Array:
  """The float kernel the QAT forward effectively multiplies by (reference for tests)."""
  values, scale = quantize_int4(kernel)
  return values.astype(jnp.float32) * scale


def to_int4_serving(params: dict[str, Any]) -> dict[str, Any]:
  """Float/QAT param tree -> serving tree: projection kernels become int4 values + scales.

  Embeddings, norms, biases and the LM head stay float.
  """

  def convert(tree: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, sub in tree.items():
      if name in QUANTIZED_PROJECTIONS and "kernel" in sub:
        values, scale = quantize_int4(sub["kernel"])
        out[name] = {k: v for k, v in sub.items() if k != "kernel"}
        out[name].update(kernel_int4=values, kernel_scale=scale)
      elif isinstance(sub, dict):
        out[name] = convert(sub)
      else:
        out[name] = sub
    return out

  return convert(params)
