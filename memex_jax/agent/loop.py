"""The batched agent loop: Algorithm 1 over many episodes at once.

Each round, every live episode asks the policy for its next turn; the policy answers all of
them in one call (the JAX sampler decodes them as one batch). Memory tools run in-process; the
round's environment actions then run together, one call per env pool (`envs.batch`), so pooled
engines step in parallel. Episodes end independently, and whatever one episode's model or env
writes ends at most that episode, as a scored failure (see `memex_jax.agent`): the batch goes on.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from memex_jax.agent.chat import ChatRenderer
from memex_jax.agent.config import AgentConfig
from memex_jax.agent.episode import Episode
from memex_jax.agent.policy import Policy
from memex_jax.agent.prompts import build_system_prompt
from memex_jax.agent.trajectory import Trajectory
from memex_jax.envs import batch
from memex_jax.envs.base import Env


@dataclasses.dataclass(frozen=True)
class EpisodeSpec:
  """One episode to run.

  Attributes:
    env: its environment instance (not shared with another live episode).
    task: what `env.reset` takes.
    group_id: the prompt group (rollouts of one task share it).
  """

  env: Env
  task: Any
  group_id: int = 0


def run_episodes(policy: Policy, specs: Sequence[EpisodeSpec], renderer: ChatRenderer,
                 config: AgentConfig, first_trajectory_id: int = 0,
                 on_round: Callable[[int], None] | None = None) -> list[Trajectory]:
  """Runs every episode to its end; returns their trajectories in `specs` order.

  Args:
    policy: produces the turns; episode i is its `episode_id` i.
    specs: the episodes.
    renderer: the ChatML renderer over the policy's tokenizer.
    config: memory regime, budgets, tools.
    first_trajectory_id: trajectory ids are first_trajectory_id + i.
    on_round: called after each round with the number of turns it took (progress bars).
  """
  system_prompt = build_system_prompt(config.tool_schemas(), config.mode,
                                      config.env_instructions, config.prompt_style)
  episodes = [Episode(i, spec.group_id, renderer, config, system_prompt)
              for i, spec in enumerate(specs)]
  resets = batch.reset_envs([spec.env for spec in specs], [spec.task for spec in specs])
  requests = [r for r in (e.begin(reset) for e, reset in zip(episodes, resets)) if r is not None]
  while requests:
    turns = policy.generate(requests)
    if len(turns) != len(requests):
      raise ValueError(f"the policy returned {len(turns)} turns for {len(requests)} requests")
    commands = {request.episode_id: episodes[request.episode_id].take_turn(
        turn, request.max_new_tokens) for request, turn in zip(requests, turns)}
    acting = [i for i, command in commands.items() if command is not None]
    replies = dict(zip(acting, batch.step_envs([specs[i].env for i in acting],
                                               [commands[i] for i in acting])))
    next_requests = []
    for request in requests:
      follow_up = episodes[request.episode_id].finish_turn(replies.get(request.episode_id))
      if follow_up is None:
        policy.release(request.episode_id)
      else:
        next_requests.append(follow_up)
    if on_round is not None:
      on_round(len(requests))
    requests = next_requests
  return [episode.trajectory(first_trajectory_id + i) for i, episode in enumerate(episodes)]
