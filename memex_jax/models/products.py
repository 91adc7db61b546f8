"""Matrix products with a chosen operand dtype, accumulated in float32 (`ModelConfig.matmul_dtype`).

XLA on the CPU runs bfloat16 x bfloat16 -> float32 on the matrix units (4-5x its float32 matmul
on this machine's AMX), while a bfloat16 result takes a slow path: every product here returns
float32. `operand_dtype` None multiplies the operands as they come.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array


def cast(x: Array, operand_dtype: str | None) -> Array:
  """x in the operand dtype (unchanged when None)."""
  return x if operand_dtype is None else x.astype(operand_dtype)


def dot(a: Array, b: Array, dims, operand_dtype: str | None) -> Array:
  """`jax.lax.dot_general(a, b, dims)` on operands in `operand_dtype`, as float32."""
  return jax.lax.dot_general(cast(a, operand_dtype), cast(b, operand_dtype), dims,
                             preferred_element_type=jnp.float32)


def einsum(spec: str, a: Array, b: Array, operand_dtype: str | None) -> Array:
  """`jnp.einsum(spec, a, b)` on operands in `operand_dtype`, as float32."""
  return jnp.einsum(spec, cast(a, operand_dtype), cast(b, operand_dtype),
                    preferred_element_type=jnp.float32)


def row_major_transpose(x: Array) -> Array:
  """x [N M] -> a row-major copy of x.T [M N].

  XLA on the CPU lays a transpose out as a column-major view of its operand, and a product
  taking that view runs in float32 whatever its operands' dtype (the matrix-unit kernels take
  row-major operands only). Joining the two halves of the rows makes a copy with a layout of its
  own; the copy is also what keeps XLA from folding the transpose into a strided contraction.
  """
  x_t = x.T
  half = x_t.shape[1] // 2
  return jnp.concatenate([x_t[:, :half], x_t[:, half:]], axis=1)
