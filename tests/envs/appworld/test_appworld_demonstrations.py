"""AppWorld through the agent loop: expert demonstrations in the Memex format, and pooled
episodes (each pool worker owns one AppWorld worker) surviving a killed pool worker."""

import functools
import os
import signal
import time

import psutil
import pytest

from memex_jax.agent import ChatRenderer, EpisodeSpec, ScriptedPolicy, run_episodes
from memex_jax.envs import pool as env_pool
from memex_jax.envs.appworld import demonstrations
from memex_jax.envs.appworld import env as appworld_env
from memex_jax.envs.appworld import generate
from memex_jax.envs.pooled import PooledEnv


@pytest.fixture(scope="module")
def renderer(smollm2_tokenizer):
  return ChatRenderer(smollm2_tokenizer)


def test_solution_apis_lists_logins_first():
  solution = ["apis.supervisor.show_profile()",
              "apis.venmo.show_transactions(access_token=t)\napis.phone.search_contacts()",
              "apis.venmo.show_transactions(page_index=1)"]
  assert demonstrations.solution_apis(solution) == [
      ("venmo", "login"), ("venmo", "show_transactions"), ("phone", "login"),
      ("phone", "search_contacts")]


def test_expert_demonstration_archives_and_reads_the_docs(renderer, task_by_type, shared_env):
  task = task_by_type["received_note"]
  trajectory = demonstrations.make_demonstration(task, renderer, env=shared_env)
  assert trajectory.metrics.success and trajectory.metrics.num_malformed == 0
  assert trajectory.metrics.num_compress == 1 and trajectory.metrics.num_read == 1
  docs = trajectory.memory[demonstrations.DOCS_INDEX]["content"]
  for app, api in demonstrations.solution_apis(generate.read_json(task, "solution")):
    assert f"{app}.{api}(" in docs  # every API the solution calls was looked up and archived
  solution_steps = len(generate.read_json(task, "solution"))
  assert trajectory.metrics.steps == solution_steps + 3


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
                                renderer, demonstrations.agent_config())
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
