"""An `Env` view of one episode slot of an `EnvPool`, so the agent loop can drive pooled engines.

Engines that must live one per process (ALFWorld's fast-downward) run in pool workers; the agent
loop keeps talking to the plain Env seam. A crashed or hung worker shows up as a failed step: the
episode ends lost with the pool's reason, and the loop carries on.

`reset_together` and `step_together` serve many views of one pool with a single pool call, so
their workers reset and step in parallel (`memex_jax.envs.batch` uses them); a view's own
`reset`/`step` is the one-episode case of the same code.
"""

from __future__ import annotations

from typing import Any, Sequence

from memex_jax.envs import pool as pool_lib

# (observation, done, won, info), as `Env.step` returns it.
StepOutcome = tuple[str, bool, bool, dict[str, Any]]


class PooledEnv:
  """Implements `memex_jax.envs.base.Env` for episode `episode_id` of `pool`."""

  def __init__(self, pool: pool_lib.EnvPool, episode_id: int):
    self.pool, self.episode_id = pool, episode_id
    self._changed = False

  def reset(self, task: Any) -> tuple[str, str]:
    [result] = reset_together([self], [task])
    if isinstance(result, str):
      raise RuntimeError(result)
    return result

  def step(self, command: str) -> StepOutcome:
    [outcome] = step_together([self], [command])
    return outcome

  def changes_state(self, command: str) -> bool:
    del command  # the pool reports it for the step that just ran
    return self._changed


def _one_pool(envs: Sequence[PooledEnv]) -> pool_lib.EnvPool:
  pools = {id(env.pool) for env in envs}
  if len(pools) > 1:
    raise ValueError(f"views of {len(pools)} different pools; group them by pool first")
  return envs[0].pool


def reset_together(envs: Sequence[PooledEnv],
                   tasks: Sequence[Any]) -> list[tuple[str, str] | str]:
  """Starts every view's episode in one pool call: (task_text, observation), or why it failed."""
  if not envs:
    return []
  pool = _one_pool(envs)
  # The agent loop may have stopped an episode (step budget, Finish) before the engine said done.
  pool.release([env.episode_id for env in envs if env.episode_id in pool.running])
  results = {r.episode_id: r for r in pool.start(
      [pool_lib.PoolEpisode(env.episode_id, task) for env, task in zip(envs, tasks)])}
  replies: list[tuple[str, str] | str] = []
  for env in envs:
    result = results[env.episode_id]
    replies.append(f"episode {env.episode_id} could not start: {result.reason}" if result.failed
                   else (result.task_text, result.observation))
  return replies


def step_together(envs: Sequence[PooledEnv], commands: Sequence[str]) -> list[StepOutcome]:
  """Steps every view's episode in one pool call; a failed worker gives a done, lost step."""
  if not envs:
    return []
  pool = _one_pool(envs)
  results = {r.episode_id: r for r in pool.step(
      {env.episode_id: command for env, command in zip(envs, commands)})}
  outcomes = []
  for env in envs:
    result = results[env.episode_id]
    info = dict(result.info)
    if result.failed:
      info.update(failed=True, reason=result.reason, changed_state=False)
      observation = f"The environment failed: {result.reason}"
    else:
      observation = result.observation
    env._changed = bool(info.get("changed_state", False))  # pylint: disable=protected-access
    outcomes.append((observation, result.done or result.failed,
                     result.won and not result.failed, info))
  return outcomes
