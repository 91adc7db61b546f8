"""The frozen executor seam: `solve(tasks, experiences) -> results` over a batch.

ExpHarness improves an executor through its input alone, so everything it needs of one is
here: a batch of tasks, each with the experiences retrieved for it (none for the No-Memory
run), in; each task's response, its score under the task's own metric, and token counts out.
Implementations: `SamplerExecutor` (the local JAX sampler), `AgentExecutor` (a whole Memex
episode on an Env) and `HttpExecutor` (http_executor.py, an OpenAI-compatible endpoint). The
single-turn ones share `ChatExecutor`: the family's prompt template (prompts.py), one
completion per task, then the static suite's metric.
"""

from __future__ import annotations

import abc
import dataclasses
import itertools
from typing import Any, Callable, Protocol, Sequence

from memex_jax.agent.chat import ChatRenderer, Message
from memex_jax.agent.config import AgentConfig
from memex_jax.agent.loop import EpisodeSpec, run_episodes
from memex_jax.agent.policy import Policy
from memex_jax.agent.trajectory import Trajectory
from memex_jax.envs.base import Env
from memex_jax.envs.static import metrics
from memex_jax.envs.static.sources import TaskRecord
from memex_jax.harness import prompts
from memex_jax.harness.experience import ExperienceUnit
from memex_jax.sampling import completions
from memex_jax.sampling.sampler import Sampler


@dataclasses.dataclass(frozen=True)
class ExecutorTask:
  """One task for a frozen executor.

  Attributes:
    task: a static TaskRecord (single-turn executors), or what the Env's `reset` takes
      (AgentExecutor).
    max_tokens: cap on the response's tokens (on each turn, for an agent episode).
  """

  task: Any
  max_tokens: int = 512


@dataclasses.dataclass(frozen=True)
class ExecutorResult:
  """What the executor did with one task.

  Attributes:
    response: the answer text (an episode's Finish answer, "" without one).
    score: the task metric's value (an episode: 1 for a win, else the env's partial credit, e.g.
      ALFWorld's goal-condition share; 0 when no response came back).
    passed: the metric counts the response as correct (an episode: the env reported it won).
    prompt_tokens: tokens the executor read (an episode: its context tokens, each counted once).
    completion_tokens: tokens it generated.
    detail: the metric's reason, or why there is no response (then `error` is True).
    error: the executor failed to respond (e.g. an endpoint timeout); scored as a failure.
    transcript: an episode's turns after its task message (actions and observations), what a
      summarizer reads of it; "" for single-turn executors (their response is the whole turn).
    steps: an episode's agent turns; None for single-turn executors.
  """

  response: str
  score: float
  passed: bool
  prompt_tokens: int
  completion_tokens: int
  detail: str = ""
  error: bool = False
  transcript: str = ""
  steps: int | None = None


class Executor(Protocol):
  """A frozen, replaceable task solver."""

  def solve(self, tasks: Sequence[ExecutorTask],
            experiences: Sequence[Sequence[ExperienceUnit]]) -> list[ExecutorResult]:
    """One result per task, in order; `experiences[i]` enter task i's context (empty: none)."""


def _check_batch(tasks: Sequence[ExecutorTask],
                 experiences: Sequence[Sequence[ExperienceUnit]]) -> None:
  if len(tasks) != len(experiences):
    raise ValueError(f"{len(tasks)} tasks but {len(experiences)} experience lists")


@dataclasses.dataclass(frozen=True)
class Completion:
  """One chat completion of a single-turn executor.

  Attributes:
    text: the reply ("" when `failure` is set).
    prompt_tokens: tokens of the rendered prompt.
    completion_tokens: tokens generated.
    failure: why no reply came back ("" when one did).
  """

  text: str
  prompt_tokens: int = 0
  completion_tokens: int = 0
  failure: str = ""


class ChatExecutor(abc.ABC):
  """A single-turn executor of static tasks: template, one completion each, the suite's metric."""

  @abc.abstractmethod
  def complete(self, conversations: Sequence[Sequence[Message]],
               max_tokens: Sequence[int]) -> list[Completion]:
    """One completion per conversation, in order."""

  def solve(self, tasks: Sequence[ExecutorTask],
            experiences: Sequence[Sequence[ExperienceUnit]]) -> list[ExecutorResult]:
    _check_batch(tasks, experiences)
    for task in tasks:
      if not isinstance(task.task, TaskRecord):
        raise TypeError(f"{type(self).__name__} solves static TaskRecords, got "
                        f"{type(task.task).__name__}")
    conversations = [prompts.static_messages(t.task, e) for t, e in zip(tasks, experiences)]
    replies = self.complete(conversations, [t.max_tokens for t in tasks])
    results = []
    for task, reply in zip(tasks, replies):
      if reply.failure:
        results.append(ExecutorResult("", 0.0, False, reply.prompt_tokens,
                                      reply.completion_tokens, reply.failure, error=True))
        continue
      verdict = metrics.score(task.task, reply.text)
      results.append(ExecutorResult(reply.text, verdict.value, verdict.passed,
                                    reply.prompt_tokens, reply.completion_tokens, verdict.detail))
    return results


class SamplerExecutor(ChatExecutor):
  """The local JAX sampler as a frozen executor (any model the project loads).

  Attributes:
    sampler: decodes the prompts on its slots (it must hold no live episode).
    renderer: the project's ChatML rendering over the sampler's tokenizer.
    temperature: 0 (greedy) by default, as frozen executors are evaluated.
  """

  def __init__(self, sampler: Sampler, temperature: float = 0.0):
    self.sampler = sampler
    self.renderer = ChatRenderer(sampler.tokenizer)
    self.temperature = temperature

  def complete(self, conversations: Sequence[Sequence[Message]],
               max_tokens: Sequence[int]) -> list[Completion]:
    window = self.sampler.config.cache_length
    prompts_ids = [self.renderer.prompt_ids(c) for c in conversations]
    fits = [i for i, ids in enumerate(prompts_ids) if len(ids) < window]
    turns = dict(zip(fits, completions.complete(
        self.sampler, [prompts_ids[i] for i in fits], [max_tokens[i] for i in fits],
        temperature=self.temperature)))
    out = []
    for i, ids in enumerate(prompts_ids):
      if i not in turns:
        out.append(Completion("", len(ids), 0, f"the prompt's {len(ids)} tokens do not fit the "
                              f"{window}-token context window"))
        continue
      out.append(Completion(self.renderer.assistant_text(turns[i].ids), len(ids),
                            len(turns[i].ids)))
    return out


class _WithExperiences:
  """An Env whose task text carries the retrieved experiences (the agentic template)."""

  def __init__(self, env: Env, experiences: Sequence[ExperienceUnit], family: str):
    self.env, self.experiences, self.family = env, experiences, family

  def reset(self, task: Any) -> tuple[str, str]:
    task_text, observation = self.env.reset(task)
    return prompts.agent_task_text(task_text, self.experiences, self.family), observation

  def step(self, command: str) -> tuple[str, bool, bool, dict[str, Any]]:
    return self.env.step(command)

  def changes_state(self, command: str) -> bool:
    return self.env.changes_state(command)


class AgentExecutor:
  """The Memex agent loop as a frozen executor: one whole episode per task.

  Attributes:
    policy: the agent's model (e.g. a Sampler; it holds `episodes_per_call` episodes at once).
    renderer: the ChatML renderer over the policy's tokenizer.
    config: the agent's memory regime and budgets (each task's max_tokens replaces its
      max_turn_tokens).
    make_env: a fresh Env per episode.
    family: the prompt family of the experiences (ALFWorld by default).
    episodes_per_call: episodes run together (at most the sampler's slots).
  """

  def __init__(self, policy: Policy, renderer: ChatRenderer, config: AgentConfig,
               make_env: Callable[[], Env], family: str = prompts.ALFWORLD,
               episodes_per_call: int = 8):
    self.policy, self.renderer, self.config, self.make_env = policy, renderer, config, make_env
    self.family, self.episodes_per_call = family, episodes_per_call

  def solve(self, tasks: Sequence[ExecutorTask],
            experiences: Sequence[Sequence[ExperienceUnit]]) -> list[ExecutorResult]:
    _check_batch(tasks, experiences)
    results: list[ExecutorResult | None] = [None] * len(tasks)
    # Episodes run together share one turn budget, so tasks are grouped by theirs.
    order = sorted(range(len(tasks)), key=lambda i: tasks[i].max_tokens)
    for budget, group in itertools.groupby(order, key=lambda i: tasks[i].max_tokens):
      config = dataclasses.replace(self.config, max_turn_tokens=budget)
      group = list(group)
      for first in range(0, len(group), self.episodes_per_call):
        chunk = group[first:first + self.episodes_per_call]
        specs = [EpisodeSpec(_WithExperiences(self.make_env(), experiences[i], self.family),
                             tasks[i].task) for i in chunk]
        for i, trajectory in zip(chunk, run_episodes(self.policy, specs, self.renderer, config)):
          results[i] = _episode_result(trajectory)
    return results


def _episode_result(trajectory: Trajectory) -> ExecutorResult:
  m = trajectory.metrics
  # Each segment opens with [system, task]: the transcript is what follows.
  turns = [f"{message.role}: {message.content}" for segment in trajectory.segments
           for message in segment.messages[2:]]
  return ExecutorResult(trajectory.answer or "", m.score, bool(m.success),
                        m.total_tokens - m.generated_tokens, m.generated_tokens,
                        trajectory.error or m.finish_reason, error=bool(trajectory.error),
                        transcript="\n".join(turns), steps=m.steps)
