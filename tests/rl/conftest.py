"""Sample factory and a tiny model shared by the rl tests."""

from __future__ import annotations

from typing import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memex_jax.models import config as config_lib
from memex_jax.models import transformer
from memex_jax.rl.sample import Sample


@pytest.fixture(scope="session")
def make_sample() -> Callable[..., Sample]:
  """(token_ids, loss_mask, trajectory_id, ...) -> Sample with rollout logprobs -0.5 on trained
  tokens unless given."""

  def build(token_ids: Sequence[int], loss_mask: Sequence[int], trajectory_id: int,
            group_id: int = 0, index: int = 0, reward: float = 0.0,
            rollout_logprobs: Sequence[float] | None = None) -> Sample:
    mask = np.asarray(loss_mask, np.int32)
    if rollout_logprobs is None:
      rollout_logprobs = -0.5 * mask
    return Sample(token_ids=np.asarray(token_ids, np.int32), loss_mask=mask,
                  rollout_logprobs=np.asarray(rollout_logprobs, np.float32),
                  trajectory_id=trajectory_id, group_id=group_id, reward=reward, index=index)

  return build


@pytest.fixture(scope="session")
def tiny_model():
  """(ModelConfig, params) of a randomly initialised tiny llama."""
  cfg = config_lib.tiny("llama")
  tokens = jnp.zeros((1, 4), jnp.int32)
  params = jax.jit(transformer.Transformer(cfg).init)(jax.random.PRNGKey(0), tokens, tokens)
  return cfg, nn.unbox(params["params"])
