"""Segments and trajectories: what the agent loop hands to evaluation, and (as `rl.Sample`s)
to the learner."""

from __future__ import annotations

import dataclasses
from typing import Any

from memex_jax.agent.chat import Message
from memex_jax.agent.rewards import RewardBreakdown
from memex_jax.rl.sample import Sample

# Why an episode ended.
FINISHED = "finish"  # The agent called Finish.
ENV_DONE = "env_done"  # The environment reported the episode over (won or lost).
MAX_STEPS = "max_steps"  # T_max turns without an ending.
CONTEXT_OVERFLOW = "context_overflow"  # The context would pass the model's window.
ENV_ERROR = "env_error"  # The env raised or sent untokenizable text; scored as a failure.
FINISH_REASONS = (FINISHED, ENV_DONE, MAX_STEPS, CONTEXT_OVERFLOW, ENV_ERROR)


@dataclasses.dataclass(frozen=True)
class EpisodeMetrics:
  """Per-episode numbers for logging and evaluation.

  Attributes:
    success: the environment reported the task won.
    score: the environment's score of the episode: 1 for a win, else its partial credit where it
      reports one (ALFWorld: the share of the goal's conditions met), else 0.
    steps: agent turns taken.
    peak_working / mean_working: working-context tokens (ContextStatus) over the steps.
    total_tokens: tokens over all segments (what training on the episode consumes).
    generated_tokens: tokens the policy sampled.
    num_compress / num_read: successful CompressExperience / ReadExperience calls.
    num_truncations: hard truncations (full-context regime).
    num_segments: segments of the trajectory.
    num_redundant / num_malformed / num_tool_calls: counts behind the penalties.
    p_context / p_redundancy / p_format: the penalties of Eq. 1 (unweighted).
    reward: R of Eq. 1.
    finish_reason: one of FINISH_REASONS.
  """

  success: bool
  score: float
  steps: int
  peak_working: int
  mean_working: float
  total_tokens: int
  generated_tokens: int
  num_compress: int
  num_read: int
  num_truncations: int
  num_segments: int
  num_redundant: int
  num_malformed: int
  num_tool_calls: int
  p_context: float
  p_redundancy: float
  p_format: float
  reward: float
  finish_reason: str

  def as_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Segment:
  """The context between two compressions: its conversation and what the learner trains on.

  Segment 0 starts from [system, task]; segment i > 0 from [system, task, summary_{i-1}].

  Attributes:
    messages: the segment's conversation as text (auditing, demonstrations).
    sample: its tokens, loss mask and rollout logprobs, with the trajectory's ids and reward.
  """

  messages: tuple[Message, ...]
  sample: Sample


@dataclasses.dataclass(frozen=True)
class Trajectory:
  """A finished episode.

  Attributes:
    trajectory_id: unique id within the run.
    group_id: the prompt group.
    task_text: the task instruction.
    segments: its segments, in order.
    memory: the experience store D, exported whole (index -> content, description, step).
    answer: the Finish answer, if any.
    reward: Eq. 1 term by term.
    metrics: per-episode metrics.
    error: what went wrong when the episode ended with `env_error`.
  """

  trajectory_id: int
  group_id: int
  task_text: str
  segments: tuple[Segment, ...]
  memory: dict[str, dict[str, Any]]
  answer: str | None
  reward: RewardBreakdown
  metrics: EpisodeMetrics
  error: str = ""

  @property
  def samples(self) -> tuple[Sample, ...]:
    """What the learner trains on: one sample per segment."""
    return tuple(segment.sample for segment in self.segments)
