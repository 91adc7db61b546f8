"""Measured matmul throughput: the denominator of MFU in the learner's metrics and benchmarks."""

from __future__ import annotations

import time

import jax


def matmul_peak_flops(dtype: str, size: int, repeats: int = 5) -> float:
  """FLOP/s of a square `size` matmul in `dtype` (median of `repeats`, after a warm-up)."""
  a = jax.random.normal(jax.random.PRNGKey(0), (size, size), dtype)
  b = jax.random.normal(jax.random.PRNGKey(1), (size, size), dtype)
  mm = jax.jit(lambda x, y: x @ y)
  jax.block_until_ready(mm(a, b))
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(mm(a, b))
    times.append(time.perf_counter() - start)
  return 2 * size ** 3 / sorted(times)[len(times) // 2]
