"""The batched agent loop: Algorithm 1 over many episodes at once.

Each round, the live episodes that wait for a turn ask the policy for it; the policy answers in
one call (the JAX sampler decodes them as one batch). A streaming policy (`StreamingPolicy`, the
sampler) answers with the turns that ended so far, so an episode whose short turn is done acts
while another is still writing a long one. Memory tools run in-process; the round's environment
actions then run together, one call per env pool (`envs.batch`), so pooled engines step in
parallel. With `max_live`, an ended episode's place goes to the next waiting one. Episodes end
independently, and whatever one episode's model or env writes ends at most that episode, as a
scored failure (see `memex_jax.agent`): the batch goes on.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from memex_jax.agent.chat import ChatRenderer
from memex_jax.agent.config import AgentConfig
from memex_jax.agent.episode import Episode
from memex_jax.agent.policy import Policy, StreamingPolicy, Turn, TurnRequest
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


def _answer(policy: Policy, requests: Sequence[TurnRequest]) -> dict[int, Turn]:
  """The turns that ended, by episode id: some of `requests`' (or earlier ones') for a streaming
  policy, all of them otherwise."""
  if isinstance(policy, StreamingPolicy):
    return policy.advance(requests)
  turns = policy.generate(requests)
  if len(turns) != len(requests):
    raise ValueError(f"the policy returned {len(turns)} turns for {len(requests)} requests")
  return {request.episode_id: turn for request, turn in zip(requests, turns)}


def run_episodes(policy: Policy, specs: Sequence[EpisodeSpec], renderer: ChatRenderer,
                 config: AgentConfig, first_trajectory_id: int = 0,
                 on_round: Callable[[int], None] | None = None, max_live: int | None = None,
                 on_end: Callable[[int, Trajectory], None] | None = None) -> list[Trajectory]:
  """Runs every episode to its end; returns their trajectories in `specs` order.

  Args:
    policy: produces the turns; episode i is its `episode_id` i.
    specs: the episodes, each with its own env (pool views with distinct ids).
    renderer: the ChatML renderer over the policy's tokenizer.
    config: memory regime, budgets, tools.
    first_trajectory_id: trajectory ids are first_trajectory_id + i.
    on_round: called after each round with the number of turns it took (progress bars).
    max_live: at most this many episodes run at once (the policy's slots); the next in `specs`
      order starts when one ends. None: all at once.
    on_end: called with (i, trajectory) as episode i ends (to save it before the rest end).
  """
  system_prompt = build_system_prompt(config.tool_schemas(), config.mode,
                                      config.env_instructions, config.prompt_style)
  episodes = [Episode(i, spec.group_id, renderer, config, system_prompt)
              for i, spec in enumerate(specs)]
  waiting = list(range(len(specs)))[::-1]  # popped from the end: specs order
  trajectories: dict[int, Trajectory] = {}

  def end(i: int) -> None:
    batch.release_envs([specs[i].env])
    trajectories[i] = episodes[i].trajectory(first_trajectory_id + i)
    if on_end is not None:
      on_end(i, trajectories[i])

  def start(count: int) -> list[TurnRequest]:
    """Begins up to `count` waiting episodes; their first requests."""
    starting = [waiting.pop() for _ in range(min(count, len(waiting)))]
    resets = batch.reset_envs([specs[i].env for i in starting], [specs[i].task for i in starting])
    requests = []
    for i, reset in zip(starting, resets):
      request = episodes[i].begin(reset)
      if request is None:  # it could not start: ended, and its place is free again
        end(i)
        requests += start(1)
      else:
        requests.append(request)
    return requests

  asked: dict[int, TurnRequest] = {}
  requests = start(len(specs) if max_live is None else max_live)
  while requests or asked:
    asked.update((r.episode_id, r) for r in requests)
    turns = _answer(policy, requests)
    unasked = set(turns) - set(asked)
    if unasked:
      raise ValueError(f"the policy returned turns for episodes {sorted(unasked)} never asked")
    done = [asked.pop(i) for i in sorted(turns)]
    commands = {r.episode_id: episodes[r.episode_id].take_turn(turns[r.episode_id],
                                                               r.max_new_tokens) for r in done}
    acting = [i for i, command in commands.items() if command is not None]
    replies = dict(zip(acting, batch.step_envs([specs[i].env for i in acting],
                                               [commands[i] for i in acting])))
    requests, ended = [], 0
    for request in done:
      follow_up = episodes[request.episode_id].finish_turn(replies.get(request.episode_id))
      if follow_up is None:
        policy.release(request.episode_id)
        end(request.episode_id)
        ended += 1
      else:
        requests.append(follow_up)
    requests += start(ended)
    if on_round is not None and done:
      on_round(len(done))
  return [trajectories[i] for i in range(len(specs))]
