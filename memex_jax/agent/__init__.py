"""The Memex agent: ChatML tool format, parser, Algorithm 1 over a batch, rewards, baselines.

Model text enters at one boundary, the parser: whatever a model writes, its episode is scored,
never the run stopped. A malformed turn (text a tokenizer cannot encode, such as a lone
surrogate escape, included) counts in P_format; a failing env, or env text that cannot be
tokenized, ends that episode as `env_error`. Only a policy breaking its contract, or a bug of the
loop itself, raises.
"""

from memex_jax.agent.chat import (IM_END, IM_START, ChatRenderer, Message, RenderedIds,
                                  tool_response, tool_response_body, tools_block)
from memex_jax.agent.config import FULL_CONTEXT, MEMEX, MODES, SUMMARY_ONLY, AgentConfig
from memex_jax.agent.episode import Episode
from memex_jax.agent.loop import EpisodeSpec, run_episodes
from memex_jax.agent.parser import (FORMAT_ERRORS, INVALID_ARGUMENTS, INVALID_JSON,
                                    INVALID_TEXT, MAX_NESTING, MISSING_ARGUMENTS, MISSING_NAME,
                                    NO_TOOL_CALL, TAG_MISMATCH, ParsedTurn, ToolCall, parse_turn,
                                    text_problem)
from memex_jax.agent.policy import Policy, StreamingPolicy, Turn, TurnRequest
from memex_jax.agent.prompts import build_system_prompt
from memex_jax.agent.rewards import (RedundancyTracker, RewardBreakdown, RewardWeights,
                                     StepRecord, context_penalty, shaped_reward)
from memex_jax.agent.scripted import ScriptedPolicy, ScriptedTurn
from memex_jax.agent.trajectory import (CONTEXT_OVERFLOW, ENV_DONE, ENV_ERROR, FINISH_REASONS,
                                        FINISHED, MAX_STEPS, EpisodeMetrics, Segment,
                                        Trajectory)

__all__ = [
    "AgentConfig", "CONTEXT_OVERFLOW", "ChatRenderer", "ENV_DONE", "ENV_ERROR", "Episode",
    "EpisodeMetrics", "EpisodeSpec", "FINISHED", "FINISH_REASONS", "FORMAT_ERRORS",
    "FULL_CONTEXT", "IM_END", "IM_START", "INVALID_ARGUMENTS", "INVALID_JSON",
    "INVALID_TEXT", "MAX_NESTING", "MAX_STEPS", "MEMEX", "MISSING_ARGUMENTS", "MISSING_NAME",
    "MODES", "Message", "NO_TOOL_CALL",
    "ParsedTurn", "Policy", "RedundancyTracker", "RenderedIds", "RewardBreakdown",
    "RewardWeights", "SUMMARY_ONLY", "ScriptedPolicy", "ScriptedTurn", "Segment", "StepRecord",
    "StreamingPolicy",
    "TAG_MISMATCH", "ToolCall", "Trajectory", "Turn", "TurnRequest", "build_system_prompt",
    "context_penalty", "parse_turn", "run_episodes", "shaped_reward", "text_problem",
    "tool_response", "tool_response_body", "tools_block",
]
