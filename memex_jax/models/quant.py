"""Int4 weights, group-wise asymmetric: the QAT forward and the stored serving form.

Each projection kernel [.., In, Out] is cut into groups of `group` consecutive input channels;
every (group, output channel) gets its own scale and offset from the group's min and max:

  scale = (max - min) / 15,  value = round((w - min) / scale) in 0..15,  w' = value * scale + min

This is llama.cpp's Q4_1 layout (SmolLM2's GGUF is stored so with group 32, which therefore
round-trips exactly), and it keeps the int4 policy close to the float one: per-channel
symmetric int4 moves SmolLM2's next-token distribution by ~1.2 nats of KL, group-32 asymmetric
by none (bench/int4_kl.py measures it for any checkpoint and group size).

Training (`quant='int4_qat'`): the forward multiplies by w' and the gradient passes straight
through to the float kernel (the Memex recipe: int4 forward, float gradient accumulation); the
parameter tree is the float one, so a float checkpoint trains under QAT unchanged.

Serving (`quant='int4_serve'`): `kernel_int4` [.., In, Out] (the 4-bit values, one per int8)
with `kernel_scale` and `kernel_offset` [.., In / group, Out] float32, dequantized by the same
arithmetic, so the sampler and the QAT learner see one policy. The values sit in int8, not
packed uint4: XLA:CPU unpacks uint4 arrays several times slower than it converts int8 ones,
which made packed int4 decode slower than float; int8 keeps the dequant at float speed with a
quarter of float32's weight bytes.

AQT (aqtp 0.9.0) is not used: its calibrations are symmetric (abs-max based), and the offset
per group is what makes int4 lossless here.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

INT4_LEVELS = 15.0  # values 0..15
DEFAULT_GROUP = 32
QUANTIZED_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                         "down_proj")


def _grouped(kernel: jax.Array, group: int) -> jax.Array:
  """[.., In, Out] -> [.., In / group, group, Out]."""
  *lead, fan_in, fan_out = kernel.shape
  if fan_in % group:
    raise ValueError(f"int4 group {group} does not divide the kernel's {fan_in} input channels")
  return kernel.reshape(*lead, fan_in // group, group, fan_out)


def quantize_int4(kernel: jax.Array,
                  group: int = DEFAULT_GROUP) -> tuple[jax.Array, jax.Array, jax.Array]:
  """kernel [.., In, Out] -> (values [.., In, Out] int8 in 0..15, scale, offset [.., G, Out]).

  G = In / group.
  """
  w = _grouped(kernel.astype(jnp.float32), group)  # .. G group Out
  low = jnp.min(w, axis=-2, keepdims=True)
  scale = (jnp.max(w, axis=-2, keepdims=True) - low) / INT4_LEVELS
  scale = jnp.where(scale == 0, 1.0, scale)  # a constant group: every value 0, offset exact
  values = jnp.clip(jnp.round((w - low) / scale), 0, INT4_LEVELS)
  return (values.astype(jnp.int8).reshape(kernel.shape), scale.squeeze(-2), low.squeeze(-2))


def dequantize_int4(values: jax.Array, scale: jax.Array, offset: jax.Array) -> jax.Array:
  """(values [.., In, Out], scale, offset [.., G, Out]) -> float32 kernel [.., In, Out]."""
  group = values.shape[-2] // scale.shape[-2]
  v = _grouped(values, group).astype(jnp.float32)  # .. G group Out
  return (v * scale[..., None, :] + offset[..., None, :]).reshape(values.shape)


def fake_quantize_int4(kernel: jax.Array, group: int = DEFAULT_GROUP) -> jax.Array:
  """The float32 kernel the int4 forward multiplies by."""
  return dequantize_int4(*quantize_int4(kernel, group))


@jax.custom_vjp
def _straight_through(kernel: jax.Array, quantized: jax.Array) -> jax.Array:
  del kernel
  return quantized


def _straight_through_fwd(kernel, quantized):
  return quantized, None


def _straight_through_bwd(_, grad):
  return grad, None


_straight_through.defvjp(_straight_through_fwd, _straight_through_bwd)


def qat_kernel(kernel: jax.Array, group: int = DEFAULT_GROUP) -> jax.Array:
  """Forward: the int4 kernel (float32, exactly what serving computes); backward: identity."""
  kernel = kernel.astype(jnp.float32)  # the cast back to the param dtype is in the gradient
  return _straight_through(kernel, jax.lax.stop_gradient(fake_quantize_int4(kernel, group)))


def to_int4_serving(params: dict[str, Any], group: int = DEFAULT_GROUP) -> dict[str, Any]:
  """Float/QAT param tree -> serving tree: projection kernels become int4 values + scale/offset.

  Embeddings, norms, biases and the LM head stay float.
  """

  def convert(tree: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, sub in tree.items():
      if name in QUANTIZED_PROJECTIONS and "kernel" in sub:
        values, scale, offset = quantize_int4(sub["kernel"], group)
        out[name] = {k: v for k, v in sub.items() if k != "kernel"}
        out[name].update(kernel_int4=values, kernel_scale=scale, kernel_offset=offset)
      elif isinstance(sub, dict):
        out[name] = convert(sub)
      else:
        out[name] = sub
    return out

  return convert(params)
