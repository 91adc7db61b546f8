"""The PyTorch + transformers reference paths of the CPU side-by-side bench (float32, eager).

Each function builds its inputs once and returns a zero-argument callable that runs one
measured unit (a greedy generate, a prefill, a train step), so bench/cpu_vs_torch.py can time
it interleaved with the JAX path doing the same work on the same weights (models come from
`memex_jax.models.hf_io.torch_model`).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
import transformers



def decode(model: transformers.PreTrainedModel, prompt: np.ndarray,
           new_tokens: int) -> Callable[[], Any]:
  """Greedy `generate` of `new_tokens` ids after prompt [B P] (prefill included)."""
  ids = torch.as_tensor(prompt, dtype=torch.long)

  def once():
    with torch.no_grad():
      return model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                            do_sample=False, eos_token_id=None, pad_token_id=0)

  return once


def prefill(model: transformers.PreTrainedModel, prompt: np.ndarray) -> Callable[[], Any]:
  """One forward over prompt [B P] filling the KV cache, logits of the last position only."""
  ids = torch.as_tensor(prompt, dtype=torch.long)

  def once():
    with torch.no_grad():
      return model(ids, use_cache=True, logits_to_keep=1).logits

  return once


def train_step(model: transformers.PreTrainedModel, tokens: np.ndarray) -> Callable[[], Any]:
  """Forward + backward of the next-token loss on tokens [B T] and one AdamW update."""
  model.train()
  ids = torch.as_tensor(tokens, dtype=torch.long)
  opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.1)

  def once():
    opt.zero_grad(set_to_none=True)
    loss = model(ids, labels=ids).loss
    loss.backward()
    opt.step()
    return loss.detach()

  return once
