"""Products with a chosen operand dtype: float32 results, and on the CPU every product of the
bfloat16 projection's gradient really takes bfloat16 operands."""

import re

import jax
import jax.numpy as jnp
import numpy as np

from memex_jax.models import layers
from memex_jax.models import products


def test_products_return_float32_of_the_rounded_operands():
  a = jax.random.normal(jax.random.PRNGKey(0), (4, 32))
  b = jax.random.normal(jax.random.PRNGKey(1), (32, 8))
  rounded = lambda x: x.astype(jnp.bfloat16).astype(jnp.float32)
  want = np.asarray(rounded(a), np.float64) @ np.asarray(rounded(b), np.float64)
  got_dot = products.dot(a, b, (((1,), (0,)), ((), ())), "bfloat16")
  got_einsum = products.einsum("ik,kj->ij", a, b, "bfloat16")
  for got in (got_dot, got_einsum):
    assert got.dtype == jnp.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  assert products.cast(a, None) is a


def test_row_major_transpose_is_the_transpose():
  x = jnp.arange(35.0).reshape(7, 5)  # odd row count: unequal halves
  np.testing.assert_array_equal(products.row_major_transpose(x), x.T)


def _dot_operand_dtypes(hlo: str) -> list[tuple[str, str]]:
  """(lhs, rhs) element types of every dot in compiled HLO text."""
  types = dict(re.findall(r"%([\w.\-]+) = (\w+)\[", hlo))
  return [tuple(types[name] for name in operands)
          for operands in re.findall(r" dot\(%([\w.\-]+), %([\w.\-]+)\)", hlo)]


def test_bfloat16_projection_gradient_keeps_every_product_in_bfloat16():
  x = jax.random.normal(jax.random.PRNGKey(0), (512, 128))
  kernel = jax.random.normal(jax.random.PRNGKey(1), (128, 256))
  loss = lambda x, k: jnp.sum(layers.linear(x, k, "bfloat16") ** 2)
  hlo = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(x, kernel).compile().as_text()
  dots = _dot_operand_dtypes(hlo)
  assert len(dots) == 3  # the forward, d_x and d_kernel
  # XLA upcasts a product whose operand is a transposed (column-major) view to float32;
  # `row_major_transpose` is what keeps d_kernel's operands bfloat16.
  assert dots == [("bf16", "bf16")] * 3, dots
