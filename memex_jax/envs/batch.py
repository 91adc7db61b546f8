"""Resetting and stepping the envs of many episodes at once, as the agent loop does each round.

Views of one worker pool (`pooled.PooledEnv`) go to the pool in a single call, so its engines
reset and step in parallel; any other env runs in turn, in the caller's process. Whatever an env
raises becomes that episode's error: one broken env never stops the others.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable, Mapping, Sequence

from memex_jax.envs import pooled
from memex_jax.envs.base import Env


@dataclasses.dataclass(frozen=True)
class ResetReply:
  """An episode's start: its task text and first observation, or `error` (it did not start)."""

  task_text: str = ""
  observation: str = ""
  error: str = ""


@dataclasses.dataclass(frozen=True)
class StepReply:
  """One env action's outcome, or `error` (the env raised; the episode cannot go on).

  Attributes:
    observation: what the env answered.
    done: the episode ended.
    won: the episode was won.
    changed: the action changed the world's state (the redundancy penalty's signal).
    error: why the step failed, as "ExceptionType: message"; "" when it ran.
  """

  observation: str = ""
  done: bool = False
  won: bool = False
  changed: bool = False
  error: str = ""


def _describe(error: Exception) -> str:
  return f"{type(error).__name__}: {error}"


def _run_grouped(envs: Sequence[Env], args: Sequence[Any], run_one: Callable[[Env, Any], Any],
                 run_pooled: Callable[[list, list], list]) -> list[Any]:
  """run_one(env, arg) for plain envs in turn; run_pooled per pool; exceptions as errors."""
  replies: list[Any] = [None] * len(envs)
  by_pool: Mapping[int, list[int]] = collections.defaultdict(list)
  for i, env in enumerate(envs):
    if isinstance(env, pooled.PooledEnv):
      by_pool[id(env.pool)].append(i)
    else:
      try:
        replies[i] = run_one(env, args[i])
      except Exception as e:  # pylint: disable=broad-except
        replies[i] = e
  for members in by_pool.values():
    try:
      outcomes = run_pooled([envs[i] for i in members], [args[i] for i in members])
    except Exception as e:  # pylint: disable=broad-except
      outcomes = [e] * len(members)
    for i, outcome in zip(members, outcomes):
      replies[i] = outcome
  return replies


def reset_envs(envs: Sequence[Env], tasks: Sequence[Any]) -> list[ResetReply]:
  """`env.reset(task)` for every pair; replies in input order."""
  replies = []
  for outcome in _run_grouped(envs, tasks, lambda env, task: env.reset(task),
                              pooled.reset_together):
    try:
      if isinstance(outcome, Exception):
        raise outcome
      if isinstance(outcome, str):  # the pool's reason
        replies.append(ResetReply(error=outcome))
        continue
      task_text, observation = outcome
      replies.append(ResetReply(str(task_text), str(observation)))
    except Exception as e:  # pylint: disable=broad-except
      replies.append(ResetReply(error=_describe(e)))
  return replies


def step_envs(envs: Sequence[Env], commands: Sequence[str]) -> list[StepReply]:
  """`env.step(command)` for every pair; replies in input order."""
  replies = []
  for env, command, outcome in zip(envs, commands, _run_grouped(
      envs, commands, lambda env, command: env.step(command), pooled.step_together)):
    try:
      if isinstance(outcome, Exception):
        raise outcome
      replies.append(_step_reply(env, command, outcome))
    except Exception as e:  # pylint: disable=broad-except
      replies.append(StepReply(error=_describe(e)))
  return replies


def _step_reply(env: Env, command: str, outcome: Any) -> StepReply:
  observation, done, won, info = outcome
  # Envs report the state change in info; the Env seam also answers it after the step.
  changed = (bool(info["changed_state"]) if isinstance(info, Mapping) and "changed_state" in info
             else bool(env.changes_state(command)))
  return StepReply(str(observation), bool(done), bool(won), changed)
