"""An `Env` view of one episode slot of an `EnvPool`, so the agent loop can drive pooled engines.

Engines that must live one per process (ALFWorld's fast-downward) run in pool workers; the agent
loop keeps talking to the plain Env seam. A crashed or hung worker shows up as a failed step: the
episode ends lost with the pool's reason, and the loop carries on.
"""

from __future__ import annotations

from typing import Any

from memex_jax.envs.alfworld import pool as pool_lib


class PooledEnv:
  """Implements `memex_jax.envs.base.Env` for episode `episode_id` of `pool`."""

  def __init__(self, pool: pool_lib.EnvPool, episode_id: int):
    self.pool, self.episode_id = pool, episode_id
    self._changed = False

  def reset(self, task: Any) -> tuple[str, str]:
    if self.episode_id in self.pool.running:
      # The agent loop may stop an episode (step budget) before the engine says done.
      self.pool.release([self.episode_id])
    [result] = self.pool.start([pool_lib.Episode(self.episode_id, task)])
    if result.failed:
      raise RuntimeError(f"episode {self.episode_id} could not start: {result.reason}")
    return result.task_text, result.observation

  def step(self, command: str) -> tuple[str, bool, bool, dict[str, Any]]:
    [result] = self.pool.step({self.episode_id: command})
    info = dict(result.info)
    if result.failed:
      info.update(failed=True, reason=result.reason, changed_state=False)
      observation = f"The environment failed: {result.reason}"
    else:
      observation = result.observation
    self._changed = bool(info.get("changed_state", False))
    return observation, result.done or result.failed, result.won and not result.failed, info

  def changes_state(self, command: str) -> bool:
    del command  # the pool reports it for the step that just ran
    return self._changed
