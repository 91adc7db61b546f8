"""AppWorld episodes in the env pool through the agent loop (each pool worker owns one AppWorld
worker), surviving a killed pool worker."""

import functools
import os
import signal
import time

import psutil
import pytest

from memex_jax.agent import ChatRenderer, EpisodeSpec, ScriptedPolicy, run_episodes
from memex_jax.agent.presets import smollm2_appworld
from memex_jax.demos import appworld as demonstrations
from memex_jax.envs import pool as env_pool
from memex_jax.envs.appworld import env as appworld_env
from memex_jax.envs.appworld import generate
from memex_jax.envs.pooled import PooledEnv


@pytest.fixture(scope="module")
def renderer(smollm2_tokenizer):
  return ChatRenderer(smollm2_tokenizer)


def _pool_worker_children(pool, episode_id):
  return psutil.Process(pool.worker_pid(episode_id)).children(recursive=True)


@pytest.mark.slow
def test_pooled_episodes_and_a_killed_pool_worker(renderer, worlds, task_by_type):
  tasks = [task_by_type["received_note"]] * 2  # one task twice at once, as a GRPO group does
  factory = functools.partial(appworld_env.AppWorldEnv, appworld_env.AppWorldConfig())
  with env_pool.EnvPool(factory, num_workers=2, step_timeout_s=90.0,
                        reset_timeout_s=240.0) as pool:
    # Two expert episodes side by side through the agent loop.
    scripts = [demonstrations.expert_turns(generate.read_json(t, "solution")) for t in tasks]
    trajectories = run_episodes(ScriptedPolicy(renderer, scripts),
                                [EpisodeSpec(PooledEnv(pool, i), t) for i, t in enumerate(tasks)],
                                renderer, smollm2_appworld())
    assert [t.metrics.success for t in trajectories] == [True, True]

    root = os.path.dirname(os.path.dirname(os.path.dirname(tasks[0])))
    assert not os.path.exists(os.path.join(root, "experiments"))  # outputs stay per worker

    # Killing a pool worker mid-episode takes its AppWorld worker along; the other goes on.
    started = pool.start([env_pool.PoolEpisode(10, tasks[0]), env_pool.PoolEpisode(11, tasks[1])])
    assert not any(r.failed for r in started)
    [appworld_worker] = [p for p in _pool_worker_children(pool, 10)
                         if "worker.py" in " ".join(p.cmdline())]
    os.kill(pool.worker_pid(10), signal.SIGKILL)
    results = pool.step({10: "print(1)", 11: "print(2)"})
    assert results[0].failed and "worker crashed" in results[0].reason
    assert not results[1].failed and results[1].observation.strip() == "2"
    deadline = time.monotonic() + 10
    while appworld_worker.is_running() and appworld_worker.status() != psutil.STATUS_ZOMBIE:
      assert time.monotonic() < deadline, "the AppWorld worker outlived its pool worker"
      time.sleep(0.1)
    (restarted,) = pool.start([env_pool.PoolEpisode(12, tasks[0])])
    assert not restarted.failed and pool.restarts == 1
