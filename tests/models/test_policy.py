"""The policy a run loads from a GGUF, and its int4 serving form."""

import numpy as np

from memex_jax.models import policy


def test_packaged_smollm2_loads_with_the_run_settings_and_serves_in_int4():
  cfg, params, tokenizer = policy.load_policy(dtype="bfloat16", remat=True, int4=True)
  assert (cfg.dtype, cfg.remat, cfg.quant) == ("bfloat16", True, "int4_qat")
  assert tokenizer.vocab_size >= cfg.vocab_size
  serve_cfg, serve_params = policy.serving_view(cfg, params)
  assert serve_cfg.quant == "int4_serve"
  up = serve_params["layers"]["mlp"]["up_proj"]
  assert "kernel" not in up and np.asarray(up["kernel_int4"]).size > 0
  # Float policies serve their own params unchanged.
  float_cfg = cfg.replace(quant="none")
  assert policy.serving_view(float_cfg, params) == (float_cfg, params)
