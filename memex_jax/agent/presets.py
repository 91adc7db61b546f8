"""Agent settings that go together for one model on one environment."""

from __future__ import annotations

from typing import Any

from memex_jax.agent.config import AgentConfig
from memex_jax.envs.alfworld import instructions as alfworld_instructions
from memex_jax.envs.appworld import instructions as appworld_instructions


def smollm2_alfworld(**overrides: Any) -> AgentConfig:
  """Memex on ALFWorld sized for SmolLM2's 8K window: threshold 2K, 300-token summaries."""
  fields = dict(mode="memex", max_steps=50, context_window=8192, threshold=2048,
                max_turn_tokens=512, summary_token_budget=300,
                env_instructions=alfworld_instructions.INSTRUCTIONS)
  fields.update(overrides)
  return AgentConfig(**fields)


def smollm2_appworld(**overrides: Any) -> AgentConfig:
  """Memex on AppWorld sized for SmolLM2's 8K window: code turns are longer, episodes shorter."""
  fields = dict(mode="memex", max_steps=12, context_window=8192, threshold=2048,
                max_turn_tokens=768, env_instructions=appworld_instructions.INSTRUCTIONS)
  fields.update(overrides)
  return AgentConfig(**fields)
