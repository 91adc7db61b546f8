"""Our Flax decoder on loaded weights vs transformers (torch, CPU) on the same weights.

Agreement is measured as max |ours - reference| / max |reference| over float32 logits.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers

from memex_jax.models import hf_io
from memex_jax.models.config import RopeScaling, tiny
from memex_jax.models.pretrained import smollm2_gguf_path
from memex_jax.models.transformer import Transformer

PROMPT_LENGTH = 32
TOLERANCE = 1e-3
SCALINGS = {
    "default": None,
    "linear": RopeScaling("linear", factor=4.0),
    "llama3": RopeScaling("llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                          original_max_position=16),
    "yarn": RopeScaling("yarn", factor=4.0, original_max_position=16),
}


def relative_error(ours: np.ndarray, reference: np.ndarray) -> float:
  return float(np.abs(ours - reference).max() / np.abs(reference).max())


def flax_logits(cfg, params, tokens: np.ndarray) -> np.ndarray:
  """float32 logits [B T V] of our model for tokens [B T] at positions 0..T-1."""
  positions = np.broadcast_to(np.arange(tokens.shape[1], dtype=np.int32), tokens.shape)
  logits, _ = jax.jit(Transformer(cfg).apply)({"params": params}, jnp.asarray(tokens, jnp.int32),
                                              jnp.asarray(positions))
  return np.asarray(logits, np.float32)


def torch_logits(model, tokens: np.ndarray) -> np.ndarray:
  with torch.no_grad():
    return model(torch.as_tensor(tokens, dtype=torch.long)).logits.float().numpy()


# Every family and every RoPE type runs by default; the rest of the grid is marked slow.
FAST_CASES = {("llama", "llama3"), ("qwen2", "default"), ("qwen2", "yarn"), ("qwen3", "linear"),
              ("qwen3", "yarn")}


@pytest.mark.parametrize("family,rope_type", [
    pytest.param(family, rope_type,
                 marks=() if (family, rope_type) in FAST_CASES else pytest.mark.slow)
    for family in ("llama", "qwen2", "qwen3") for rope_type in SCALINGS])
def test_tiny_random_models_match_transformers(family, rope_type, tmp_path, random_torch_model):
  cfg = tiny(family, rope_scaling=SCALINGS[rope_type])
  reference = random_torch_model(cfg, seed=len(rope_type))
  reference.save_pretrained(tmp_path)
  loaded_cfg, params = hf_io.load_hf(tmp_path)
  tokens = np.random.default_rng(0).integers(0, cfg.vocab_size, (2, PROMPT_LENGTH))

  error = relative_error(flax_logits(loaded_cfg, params, tokens), torch_logits(reference, tokens))

  assert error < TOLERANCE, f"{family}/{rope_type}: relative logit error {error:.2e}"


@pytest.fixture(scope="module")
def smollm2_reference():
  """transformers' own load of the SmolLM2-135M-Instruct GGUF (torch, float32)."""
  path = smollm2_gguf_path()
  os.environ.setdefault("HF_HUB_OFFLINE", "1")
  return transformers.AutoModelForCausalLM.from_pretrained(
      str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()


@pytest.mark.slow
def test_smollm2_weights_equal_transformers_dequantisation(smollm2, smollm2_reference):
  cfg, params = smollm2
  expected = smollm2_reference.state_dict()
  ours = hf_io.tensors_from_params(cfg, params)
  assert set(ours) == set(expected) - {"lm_head.weight"}  # tied head
  for name, array in ours.items():
    np.testing.assert_array_equal(array, expected[name].numpy(), err_msg=name)


@pytest.mark.slow
def test_smollm2_logits_match_transformers(smollm2, smollm2_reference, smollm2_tokenizer):
  cfg, params = smollm2
  chat = smollm2_tokenizer.apply_chat_template(
      [{"role": "user", "content": "Name three rivers in Europe and say which sea each one "
                                   "flows into, in one short sentence per river."}],
      add_generation_prompt=True, tokenize=True)
  tokens = np.asarray(chat[:PROMPT_LENGTH])[None]
  assert tokens.shape == (1, PROMPT_LENGTH)

  ours = flax_logits(cfg, params, tokens)
  theirs = torch_logits(smollm2_reference, tokens)

  error = relative_error(ours, theirs)
  assert error < TOLERANCE, f"SmolLM2 relative logit error {error:.2e}"
  np.testing.assert_array_equal(ours.argmax(-1), theirs.argmax(-1))
