"""Decoder building blocks: RMSNorm, projections (float / int4 QAT / int4 serving), attention, MLP.

Every parameter carries logical axis names, so sharding is declared by rules, never written here.
"""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from memex_jax.models import blocked_attention
from memex_jax.models import decode_attention
from memex_jax.models import products
from memex_jax.models import quant as quant_lib
from memex_jax.models import rope
from memex_jax.models.config import ModelConfig

Array = jax.Array
_INIT = nn.initializers.normal(stddev=0.02)
PROJECTION = "projection"  # checkpoint name of every Projection's output


class RMSNorm(nn.Module):
  """x * rsqrt(mean(x^2) + eps) * scale, computed in float32."""

  eps: float
  axis_name: str = "embed"
  param_dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, x: Array) -> Array:
    scale = self.param("scale",
                       nn.with_logical_partitioning(nn.initializers.ones, (self.axis_name,)),
                       (x.shape[-1],), self.param_dtype)
    x32 = x.astype(jnp.float32)
    normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
    return (normed * scale.astype(jnp.float32)).astype(x.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def linear(x: Array, kernel: Array, operand_dtype: str | None = None) -> Array:
  """x [.., In] @ kernel [In, Out] -> [.., Out], with a backward laid out for the CPU.

  Autodiff's kernel gradient contracts x and the output gradient over their token axes; XLA on
  the CPU then writes a transposed copy of the [N Out] gradient, fused into the elementwise ops
  that produce it (SwiGLU's backward), with strided stores. Here the gradient is formed row-major
  and x's transpose is a plain copy of its own. `operand_dtype` (see `products`) applies to the
  forward and both backward products.
  """
  return products.dot(x, kernel, (((x.ndim - 1,), (0,)), ((), ())), operand_dtype).astype(x.dtype)


def _linear_fwd(x, kernel, operand_dtype):
  return linear(x, kernel, operand_dtype), (x, kernel)


def _linear_bwd(operand_dtype, residuals, d_y):
  x, kernel = residuals
  # Cast before the copies, so they are made in the operand dtype.
  d_y = jax.lax.optimization_barrier(products.cast(d_y, operand_dtype))  # materialized as produced
  d_x = products.dot(d_y, kernel, (((d_y.ndim - 1,), (1,)), ((), ())), operand_dtype)  # .. In
  x_t = products.row_major_transpose(products.cast(x, operand_dtype).reshape(-1, x.shape[-1]))
  d_kernel = products.dot(x_t, d_y.reshape(-1, d_y.shape[-1]), (((1,), (0,)), ((), ())),
                          operand_dtype)  # In Out
  return d_x.astype(x.dtype), d_kernel.astype(kernel.dtype)


linear.defvjp(_linear_fwd, _linear_bwd)


class Projection(nn.Module):
  """y [.., Out] = x [.., In] @ kernel [In, Out] (+ bias) in one of the three quant modes."""

  features: int
  axes: tuple[str, str]
  quant: str = "none"
  use_bias: bool = False
  dtype: jnp.dtype = jnp.float32
  param_dtype: jnp.dtype = jnp.float32
  group: int = quant_lib.DEFAULT_GROUP
  operand_dtype: str | None = None  # see `products`

  @nn.compact
  def __call__(self, x: Array) -> Array:
    shape = (x.shape[-1], self.features)
    x = x.astype(self.dtype)
    if self.quant == "int4_serve":
      values = self.param("kernel_int4",
                          nn.with_logical_partitioning(nn.initializers.zeros, self.axes),
                          shape, jnp.int8)
      group_axes = (None, self.axes[1])
      groups = (shape[0] // self.group, self.features)
      scale = self.param("kernel_scale",
                         nn.with_logical_partitioning(nn.initializers.ones, group_axes),
                         groups, jnp.float32)
      offset = self.param("kernel_offset",
                          nn.with_logical_partitioning(nn.initializers.zeros, group_axes),
                          groups, jnp.float32)
      kernel = quant_lib.dequantize_int4(values, scale, offset)
    else:
      kernel = self.param("kernel", nn.with_logical_partitioning(_INIT, self.axes), shape,
                          self.param_dtype)
      if self.quant == "int4_qat":
        kernel = quant_lib.qat_kernel(kernel, self.group)
    # Named, so remat's 'dots' policy saves it: the custom VJP hides the dot inside.
    y = checkpoint_name(linear(x, kernel.astype(self.dtype), self.operand_dtype),
                        PROJECTION)
    if self.use_bias:
      bias = self.param("bias", nn.with_logical_partitioning(nn.initializers.zeros, self.axes[1:]),
                        (self.features,), self.param_dtype)
      y = y + bias.astype(self.dtype)
    return y


# A layer's KV cache: the model's (k, v) [B S K Dh], or a decode step's own layout.
AttentionCache = tuple[Array, Array] | decode_attention.DecodeCache


def cache_slots(cache: AttentionCache) -> int:
  """The slots S of a layer's cache, in either layout."""
  if isinstance(cache, decode_attention.DecodeCache):
    return cache.k.shape[3]
  return cache[0].shape[1]


def _write_cache(cache: Array, new: Array, positions: Array) -> Array:
  """cache [B S K Dh] with new [B T K Dh] written at each row's own positions [B T]; slot index
  == position, positions past the cache are dropped.

  In a decode loop this is in place only when the cache is a loop carry of its own (see
  `transformer.decode_token`): a scanned layer's cache slice is a copy.
  """
  return cache.at[jnp.arange(cache.shape[0])[:, None], positions].set(new.astype(cache.dtype))


class Attention(nn.Module):
  """Grouped-query self-attention with RoPE, optional q/k norm and an optional KV cache."""

  cfg: ModelConfig

  def _proj(self, features: int, axes: tuple[str, str], name: str,
            bias: bool = False) -> Projection:
    c = self.cfg
    return Projection(features, axes, c.quant, bias, jnp.dtype(c.dtype), jnp.dtype(c.param_dtype),
                      c.int4_group, c.matmul_dtype, name=name)

  @nn.compact
  def __call__(self, x: Array, cos: Array, sin: Array, mask: Array, positions: Array,
               segment_ids: Array | None,
               cache: AttentionCache | None) -> tuple[Array, AttentionCache | None]:
    """x [B T D], cos/sin [B T Dh], mask [B 1 T S] bool, positions [B T], segment_ids [B T] or
    None (what `mask` was made from without a cache), cache ([B S K Dh] x 2, or a decode step's
    `DecodeCache` with T = 1)."""
    c = self.cfg
    b, t, _ = x.shape
    q = self._proj(c.num_heads * c.head_dim, ("embed", "q_heads"), "q_proj", c.qkv_bias)(x)
    k = self._proj(c.num_kv_heads * c.head_dim, ("embed", "kv_heads"), "k_proj", c.qkv_bias)(x)
    v = self._proj(c.num_kv_heads * c.head_dim, ("embed", "kv_heads"), "v_proj", c.qkv_bias)(x)
    q = q.reshape(b, t, c.num_heads, c.head_dim)  # B T H Dh
    k = k.reshape(b, t, c.num_kv_heads, c.head_dim)  # B T K Dh
    v = v.reshape(b, t, c.num_kv_heads, c.head_dim)  # B T K Dh
    if c.qk_norm:
      q = RMSNorm(c.norm_eps, "head_dim", jnp.dtype(c.param_dtype), name="q_norm")(q)
      k = RMSNorm(c.norm_eps, "head_dim", jnp.dtype(c.param_dtype), name="k_norm")(k)
    q = rope.apply_rotary(q, cos, sin)
    k = rope.apply_rotary(k, cos, sin)
    q = nn.with_logical_constraint(q, ("batch", "length", "heads", "head_dim"))
    if isinstance(cache, decode_attention.DecodeCache):
      cache = decode_attention.write(cache, k, v, positions)
    elif cache is not None:
      k, v = _write_cache(cache[0], k, positions), _write_cache(cache[1], v, positions)
      cache = (k, v)
    # On accelerators XLA's own attention kernels stay; the tiles pay off on the CPU.
    on_cpu = jax.default_backend() == "cpu"
    block = c.attention_block if cache is not None else c.train_attention_block
    tiled = on_cpu and block and t >= 2 * block
    if isinstance(cache, decode_attention.DecodeCache):
      out = decode_attention.one_query_attention(q, cache, positions)  # B 1 H Dh
    elif tiled and cache is not None:
      out = blocked_attention.attention(q, k, v, positions, block,
                                        c.matmul_dtype)  # B T H Dh
    elif tiled:
      out = blocked_attention.causal_attention(q, k, v, segment_ids, block,
                                               c.matmul_dtype)  # B T H Dh
    else:
      out = jax.nn.dot_product_attention(q, k.astype(q.dtype), v.astype(q.dtype),
                                         mask=mask)  # B T H Dh
    out = out.reshape(b, t, c.num_heads * c.head_dim)
    return self._proj(c.embed_dim, ("q_heads", "embed"), "o_proj")(out), cache


class MLP(nn.Module):
  """SwiGLU: down(silu(gate(x)) * up(x))."""

  cfg: ModelConfig

  @nn.compact
  def __call__(self, x: Array) -> Array:
    c = self.cfg
    dt, pdt = jnp.dtype(c.dtype), jnp.dtype(c.param_dtype)
    proj = lambda features, axes, name: Projection(features, axes, c.quant, False, dt, pdt,
                                                   c.int4_group, c.matmul_dtype, name=name)
    gate = proj(c.mlp_dim, ("embed", "mlp"), "gate_proj")(x)  # B T F
    up = proj(c.mlp_dim, ("embed", "mlp"), "up_proj")(x)  # B T F
    h = nn.with_logical_constraint(jax.nn.silu(gate) * up, ("batch", "length", "mlp"))  # B T F
    return proj(c.embed_dim, ("mlp", "embed"), "down_proj")(h)
