"""MFU's numerator by hand, and its denominator a real, positive measurement."""

from memex_jax.runs import flops
from memex_jax.models import config


def test_matmul_peak_is_a_positive_measurement():
  assert flops.matmul_peak_flops("float32", 128, repeats=3) > 1e6


def test_train_flops_per_token_by_hand():
  cfg = config.tiny("llama")
  want = 6 * cfg.num_params + 12 * cfg.num_layers * 100 * cfg.embed_dim
  assert flops.train_flops_per_token(cfg, 100) == want
  assert flops.train_flops_per_token(cfg, 200) - want == 12 * cfg.num_layers * 100 * cfg.embed_dim
