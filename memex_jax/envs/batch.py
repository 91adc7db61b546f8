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
    score: the env's partial credit for the episode so far (`info['score']`); None if it has none.
    error: why the step failed, as "ExceptionType: message"; "" when it ran.
  """

  observation: str = ""
  done: bool = False
  won: bool = False
  changed: bool = False
  score: float | None = None
  error: str = ""


def _describe(error: Exception) -> str:
  return f"{type(error).__name__}: {error}"


def _run_grouped(envs: Sequence[Env], args: Sequence[Any], run_one: Callable[[Env, Any], Any],
                 run_pooled: Callable[[list, list], list], convert: Callable[[Env, Any, Any], Any],
                 failed: Callable[[str], Any]) -> list[Any]:
  """convert(env, arg, outcome) of run_one for plain envs in turn and of run_pooled per pool.

  Whatever running or converting raises becomes `failed("ExceptionType: message")` for the
  episodes it concerns (a pool call that raises fails the pool's whole group).
  """
  replies: list[Any] = [None] * len(envs)

  def settle(i: int, outcome: Any) -> None:
    if isinstance(outcome, Exception):
      replies[i] = failed(_describe(outcome))
      return
    try:
      replies[i] = convert(envs[i], args[i], outcome)
    except Exception as e:  # pylint: disable=broad-except
      replies[i] = failed(_describe(e))

  by_pool: dict[int, list[int]] = collections.defaultdict(list)
  for i, env in enumerate(envs):
    if isinstance(env, pooled.PooledEnv):
      by_pool[id(env.pool)].append(i)
      continue
    try:
      outcome = run_one(env, args[i])
    except Exception as e:  # pylint: disable=broad-except
      outcome = e
    settle(i, outcome)
  for members in by_pool.values():
    try:
      outcomes = run_pooled([envs[i] for i in members], [args[i] for i in members])
    except Exception as e:  # pylint: disable=broad-except
      outcomes = [e] * len(members)
    for i, outcome in zip(members, outcomes):
      settle(i, outcome)
  return replies


def _reset_reply(env: Env, task: Any, outcome: Any) -> ResetReply:
  del env, task
  if isinstance(outcome, str):  # a pool's reason the episode did not start
    return ResetReply(error=outcome)
  task_text, observation = outcome
  return ResetReply(str(task_text), str(observation))


def reset_envs(envs: Sequence[Env], tasks: Sequence[Any]) -> list[ResetReply]:
  """`env.reset(task)` for every pair; replies in input order."""
  return _run_grouped(envs, tasks, lambda env, task: env.reset(task), pooled.reset_together,
                      _reset_reply, lambda error: ResetReply(error=error))


def step_envs(envs: Sequence[Env], commands: Sequence[str]) -> list[StepReply]:
  """`env.step(command)` for every pair; replies in input order."""
  return _run_grouped(envs, commands, lambda env, command: env.step(command),
                      pooled.step_together, _step_reply, lambda error: StepReply(error=error))


def release_envs(envs: Sequence[Env]) -> None:
  """Frees the pool workers of episodes that ended on the agent's side (Finish, the step budget)
  while their engine still runs them, so waiting episodes can start; plain envs hold nothing."""
  for env in envs:
    if isinstance(env, pooled.PooledEnv):
      env.pool.release([env.episode_id])


def _step_reply(env: Env, command: str, outcome: Any) -> StepReply:
  observation, done, won, info = outcome
  # Envs report the state change in info; the Env seam also answers it after the step.
  info = info if isinstance(info, Mapping) else {}
  changed = (bool(info["changed_state"]) if "changed_state" in info
             else bool(env.changes_state(command)))
  score = float(info["score"]) if info.get("score") is not None else None
  return StepReply(str(observation), bool(done), bool(won), changed, score)
