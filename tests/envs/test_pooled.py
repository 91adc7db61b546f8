"""PooledEnv: the Env seam over a real worker pool, including a crashed worker."""

import os
import signal

from memex_jax.envs import pooled
from memex_jax.envs.pool import EnvPool
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


def test_more_episodes_than_workers_start_the_first_and_fail_the_rest_alone():
  with EnvPool(VaultEnv, num_workers=2, step_timeout_s=20) as pool:
    envs = [PooledEnv(pool, episode_id=i) for i in range(3)]
    replies = pooled.reset_together(envs, [VaultTask(seed=i, corridor_length=2) for i in range(3)])
    assert [type(r) for r in replies] == [tuple, tuple, str]
    assert "all 2 workers of the pool are running" in replies[2] and pool.running == [0, 1]
    assert not envs[1].step("read note")[1]  # a started episode plays on
