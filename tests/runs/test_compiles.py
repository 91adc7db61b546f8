"""runs.compiles counts XLA compiles from jax.monitoring's events."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from memex_jax.runs import compiles


def test_counts_a_new_shape_once_and_a_cached_call_not_at_all():
  totals = compiles.watch()
  assert compiles.watch() is totals  # one listener per process
  before = dataclasses.replace(totals)
  f = jax.jit(lambda x: jnp.sin(x) * 3.0 + x)
  f(np.ones((7, 13), np.float32)).block_until_ready()
  assert totals.compiles == before.compiles + 1
  assert totals.backend_s > before.backend_s and totals.trace_s > before.trace_s
  assert totals.seconds > before.seconds
  f(np.zeros((7, 13), np.float32)).block_until_ready()  # same shape: the jit cache
  assert totals.compiles == before.compiles + 1
  f(np.ones((3, 5), np.float32)).block_until_ready()
  assert totals.compiles == before.compiles + 2
