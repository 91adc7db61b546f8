"""PooledEnv: the Env seam over a real worker pool, including a crashed worker."""

import os
import signal

from memex_jax.envs.alfworld.pool import EnvPool
from memex_jax.envs.pooled import PooledEnv
from memex_jax.envs.toy import VaultEnv, VaultTask


def test_pooled_env_plays_restarts_and_survives_a_crash():
  with EnvPool(VaultEnv, num_workers=2, step_timeout_s=20) as pool:
    env = PooledEnv(pool, episode_id=0)
    task_text, first = env.reset(VaultTask(seed=3, corridor_length=2))
    assert "vault" in task_text.lower() and first
    observation, done, won, info = env.step("read note")
    assert not done and not won and "Vault code" in observation
    # The first read of the note changes the vault's state (so does VaultEnv in-process).
    assert info["changed_state"] is True and env.changes_state("read note") is True
    # The agent loop may stop an episode early; resetting the same view starts over.
    env.reset(VaultTask(seed=4, corridor_length=2))
    os.kill(pool.worker_pid(0), signal.SIGKILL)
    observation, done, won, info = env.step("go east")
    assert done and not won and info["failed"] and "environment failed" in observation
    other = PooledEnv(pool, episode_id=1)
    other.reset(VaultTask(seed=5, corridor_length=2))
    assert not other.step("go east")[1]  # the replacement worker serves new episodes
