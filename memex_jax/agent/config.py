"""AgentConfig: memory regime, budgets and the tool set of an agent loop."""

from __future__ import annotations

import dataclasses
from typing import Any

from memex_jax.agent.prompts import STYLES
from memex_jax.agent.rewards import RewardWeights
from memex_jax.memory.tools import (COMPRESS, MEMORY_TOOLS, READ, compress_schema,
                                    finish_schema, read_schema)

MEMEX, SUMMARY_ONLY, FULL_CONTEXT = "memex", "summary_only", "full_context"
MODES = (MEMEX, SUMMARY_ONLY, FULL_CONTEXT)


@dataclasses.dataclass(frozen=True)
class AgentConfig:
  """One agent loop's settings.

  Attributes:
    mode: memory regime. "memex": CompressExperience archives into the store, ReadExperience
      reads it back; "summary_only": CompressExperience keeps only the summary, no
      ReadExperience; "full_context": no memory tools, the oldest messages are dropped when
      the context window is full.
    max_steps: T_max, agent turns per episode.
    context_window: the model's window in tokens; memory regimes end an episode with
      `context_overflow` when a context cannot fit another token.
    threshold: tau, the working-context budget shown in ContextStatus and used by P_context.
    max_turn_tokens: cap on one assistant turn's sampled tokens.
    summary_token_budget: tokens kept of a compression's progress state.
    description_token_budget: tokens kept of each index-map description.
    warn_fraction: ContextStatus warns once working >= warn_fraction * threshold.
    offer_free_index: in the memex regime, the over-threshold warning names an unused index
      (`notes_<n>`, `ExperienceStore.free_index`). SmolLM2 after SFT wrote the index map's last
      index again instead of the next one in 22 of 23 rejected compressions
      (results/memex_cpu/2026-12-06); False leaves the counting to the policy.
    env_tool: name of the tool that forwards `command` to the environment.
    env_tool_description: its description in the tool schema.
    env_instructions: extra environment-specific text for the system prompt.
    prompt_style: "full" (tools as JSON schemas, ~1K SmolLM2 tokens on ALFWorld) or "compact"
      (one-line signatures, ~0.5K): the system prompt is in every segment a learner trains on.
    reward_weights: weights of the three penalties of Eq. 1.
  """

  mode: str = MEMEX
  max_steps: int = 50
  context_window: int = 8192
  threshold: int = 2048
  max_turn_tokens: int = 512
  summary_token_budget: int = 300
  description_token_budget: int = 48
  warn_fraction: float = 0.8
  offer_free_index: bool = True
  env_tool: str = "execute"
  env_tool_description: str = "Run one action in the environment and see what happens."
  env_instructions: str = ""
  prompt_style: str = "full"
  reward_weights: RewardWeights = RewardWeights()

  def __post_init__(self):
    if self.mode not in MODES:
      raise ValueError(f"AgentConfig.mode must be one of {MODES}, got {self.mode!r}")
    for name in ("max_steps", "context_window", "threshold", "max_turn_tokens"):
      if getattr(self, name) < 1:
        raise ValueError(f"AgentConfig.{name} must be >= 1, got {getattr(self, name)}")
    for name in ("summary_token_budget", "description_token_budget"):
      if getattr(self, name) < 0:
        raise ValueError(f"AgentConfig.{name} must be >= 0, got {getattr(self, name)}")
    if not 0.0 < self.warn_fraction <= 1.0:
      raise ValueError(f"AgentConfig.warn_fraction must be in (0, 1], got {self.warn_fraction}")
    if self.prompt_style not in STYLES:
      raise ValueError(f"AgentConfig.prompt_style must be one of {STYLES}, got "
                       f"{self.prompt_style!r}")
    if self.env_tool in MEMORY_TOOLS or self.env_tool == "Finish" or not self.env_tool:
      raise ValueError(f"AgentConfig.env_tool {self.env_tool!r} collides with a built-in tool")

  @property
  def memory_tools(self) -> frozenset[str]:
    """Memory tools available in this regime."""
    return {MEMEX: frozenset({COMPRESS, READ}), SUMMARY_ONLY: frozenset({COMPRESS}),
            FULL_CONTEXT: frozenset()}[self.mode]

  def tool_schemas(self) -> list[dict[str, Any]]:
    """Every tool the agent may call, as rendered into the system prompt."""
    env = {"name": self.env_tool, "description": self.env_tool_description,
           "parameters": {"type": "object", "properties": {"command": {
               "type": "string", "description": "The action, in the environment's words."}},
                          "required": ["command"]}}
    schemas = [env]
    if COMPRESS in self.memory_tools:
      schemas.append(compress_schema(archive=self.mode == MEMEX))
    if READ in self.memory_tools:
      schemas.append(read_schema())
    return schemas + [finish_schema()]
