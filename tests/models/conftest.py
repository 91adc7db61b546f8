"""Shared fixtures of the weight I/O tests: random transformers (torch) reference models."""

from __future__ import annotations

from typing import Callable

import pytest

from memex_jax.models import hf_io
from memex_jax.models.config import ModelConfig


@pytest.fixture
def random_torch_model() -> Callable[[ModelConfig, int], object]:
  """Factory: ModelConfig -> a transformers CausalLM with random weights (float32, eval mode).

  Every parameter is perturbed, so norm scales and biases differ from their constant inits
  and a mixed-up tensor shows in any comparison.
  """
  import torch  # pylint: disable=g-import-not-at-top  # test-only dependency
  import transformers  # pylint: disable=g-import-not-at-top

  def build(cfg: ModelConfig, seed: int = 0):
    hf_config = transformers.AutoConfig.for_model(**hf_io.config_to_hf(cfg))
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(hf_config, dtype=torch.float32)
    with torch.no_grad():
      for p in model.parameters():
        p.add_(0.05 * torch.randn_like(p))
    return model.eval()

  return build
