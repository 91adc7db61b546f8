"""The policy a run trains and samples: loaded from a GGUF, and its serving form under int4.

Not re-exported by `memex_jax.models`: it needs `memex_jax.tokenizers`, which imports this package.
"""

from __future__ import annotations

from typing import Any

from memex_jax.models import gguf_io
from memex_jax.models import quant
from memex_jax.models.config import ModelConfig
from memex_jax.models.pretrained import PACKAGED_GGUF, SMOLLM2_NAME
from memex_jax.tokenizers import Tokenizer


def load_policy(gguf: str = "", dtype: str = "float32", remat: bool = False,
                int4: bool = False, no_grad_layers: int = 0,
                matmul_dtype: str = "") -> tuple[ModelConfig, dict, Tokenizer]:
  """(config, float params, tokenizer) of a GGUF model ('' = the packaged SmolLM2).

  Args:
    gguf: path of a GGUF file, or the name of a packaged model (`pretrained.PACKAGED_GGUF`:
      smollm2-135m-instruct, qwen2.5-coder-0.5b-instruct); '' is SmolLM2-135M-Instruct.
    dtype: compute dtype of the model.
    remat: recompute each layer in the backward pass (long rows have large activations).
    int4: int4 QAT in training and int4 serving weights in rollouts (the Memex recipe).
    no_grad_layers: train only above this many lowest layers (`ModelConfig.no_grad_layers`).
    matmul_dtype: '' (products in `dtype`) or 'bfloat16': bfloat16 operands with float32
      accumulation in the big products (`ModelConfig.matmul_dtype`; the CPU's AMX units).
  """
  name = gguf or SMOLLM2_NAME
  path = str(PACKAGED_GGUF[name]()) if name in PACKAGED_GGUF else name
  cfg, params = gguf_io.load_gguf(path)
  tokenizer = Tokenizer.from_gguf(path)
  tokenizer.check_matches(cfg.vocab_size, path)
  cfg = cfg.replace(dtype=dtype, remat=bool(remat), quant="int4_qat" if int4 else "none",
                    no_grad_layers=no_grad_layers, matmul_dtype=matmul_dtype or None)
  return cfg, params, tokenizer


def serving_view(model_cfg: ModelConfig, params: Any) -> tuple[ModelConfig, Any]:
  """The rollout policy's (config, params): int4 serving weights under QAT, else the float ones."""
  if model_cfg.quant == "int4_qat":
    return (model_cfg.replace(quant="int4_serve"),
            quant.to_int4_serving(params, group=model_cfg.int4_group))
  return model_cfg, params
