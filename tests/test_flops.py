"""The matmul peak used as MFU's denominator is a real, positive measurement."""

from memex_jax import flops


def test_matmul_peak_is_a_positive_measurement():
  assert flops.matmul_peak_flops("float32", 128, repeats=3) > 1e6
