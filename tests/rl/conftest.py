"""Segment factory and a tiny model shared by the rl tests."""

from __future__ import annotations

from typing import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memex_jax.agent.trajectory import EpisodeMetrics, Segment
from memex_jax.models import config as config_lib
from memex_jax.models import transformer


def _metrics(reward: float) -> EpisodeMetrics:
  return EpisodeMetrics(
      success=reward > 0, steps=1, peak_working=0, mean_working=0.0, total_tokens=0,
      generated_tokens=0, num_compress=0, num_read=0, num_truncations=0, num_segments=1,
      num_redundant=0, num_malformed=0, num_tool_calls=0, p_context=0.0, p_redundancy=0.0,
      p_format=0.0, reward=reward, finish_reason="finish")


@pytest.fixture(scope="session")
def make_segment() -> Callable[..., Segment]:
  """(token_ids, loss_mask, trajectory_id, ...) -> Segment with rollout logprobs -0.5 on
  trained tokens unless given."""

  def build(token_ids: Sequence[int], loss_mask: Sequence[int], trajectory_id: int,
            group_id: int = 0, segment_index: int = 0, reward: float = 0.0,
            rollout_logprobs: Sequence[float] | None = None) -> Segment:
    mask = np.asarray(loss_mask, np.int32)
    if rollout_logprobs is None:
      rollout_logprobs = -0.5 * mask
    return Segment(
        token_ids=np.asarray(token_ids, np.int32), loss_mask=mask,
        rollout_logprobs=np.asarray(rollout_logprobs, np.float32),
        trajectory_id=trajectory_id, group_id=group_id, segment_index=segment_index,
        messages=(), reward=reward, metrics=_metrics(reward))

  return build


@pytest.fixture(scope="session")
def tiny_model():
  """(ModelConfig, params) of a randomly initialised tiny llama."""
  cfg = config_lib.tiny("llama")
  tokens = jnp.zeros((1, 4), jnp.int32)
  params = jax.jit(transformer.Transformer(cfg).init)(jax.random.PRNGKey(0), tokens, tokens)
  return cfg, nn.unbox(params["params"])
