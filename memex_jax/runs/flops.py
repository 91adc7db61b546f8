"""MFU's two halves: a transformer's training FLOPs per token and the measured matmul peak.

Both the learner's metrics (experiments/memex_grpo.py) and the benchmarks (bench/) use them.
"""

from __future__ import annotations

import time

import jax

from memex_jax.models import config as config_lib


def train_flops_per_token(cfg: config_lib.ModelConfig, seq_len: int) -> float:
  """Forward + backward FLOPs per token: 6 per parameter plus attention's 12 * L * T * D."""
  return 6 * cfg.num_params + 12 * cfg.num_layers * seq_len * cfg.embed_dim


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
