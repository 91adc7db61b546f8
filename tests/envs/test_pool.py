"""The env pool with real worker processes: ordered batches, crash and hang recovery."""

import functools
import json
import os
import signal
import time

import psutil
import pytest

from memex_jax.envs.alfworld import env as alfworld_env
from memex_jax.envs.alfworld import games
from memex_jax.envs import pool as env_pool


def _wait_until_dead(pid, timeout_s=10.0):
  deadline = time.monotonic() + timeout_s
  while time.monotonic() < deadline:
    try:
      if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
        return
    except psutil.NoSuchProcess:
      return
    time.sleep(0.05)
  raise AssertionError(f"process {pid} still running")


@pytest.fixture(scope="module")
def small_games(games_root, manifest):
  """The three games with the fewest receptacles, with their walkthroughs."""
  records = sorted(manifest, key=lambda r: r["num_receptacles"])[:3]
  folders = [os.path.join(games_root, r["path"]) for r in records]
  walkthroughs = []
  for folder in folders:
    with open(os.path.join(folder, games.GAME_FILE)) as f:
      walkthroughs.append(json.load(f)["walkthrough"])
  return folders, walkthroughs


@pytest.fixture(scope="module")
def pool():
  factory = functools.partial(alfworld_env.AlfWorldEnv, alfworld_env.memex_harder())
  with env_pool.EnvPool(factory, num_workers=2, step_timeout_s=20.0) as p:
    yield p


def test_schedule_is_deterministic_per_seed():
  tasks = [f"game{i}" for i in range(5)]
  a = env_pool.episode_schedule(tasks, 12, seed=1)
  assert a == env_pool.episode_schedule(tasks, 12, seed=1)
  assert a != env_pool.episode_schedule(tasks, 12, seed=2)
  assert [e.episode_id for e in a] == list(range(12))
  assert sorted(e.task for e in a[:5]) == tasks  # each pass covers every task once


@pytest.mark.slow
def test_crash_and_hang_end_only_their_episode(pool, small_games):
  (g0, g1, g2), (w0, w1, w2) = small_games
  started = pool.start([env_pool.PoolEpisode(7, g1), env_pool.PoolEpisode(3, g0)])
  assert [r.episode_id for r in started] == [3, 7] and not any(r.failed for r in started)
  assert started[0].observation == "You are in the middle of a room."

  # A worker killed mid-episode: its episode fails with the reason, the other one goes on.
  victim = pool.worker_pid(3)
  os.kill(victim, signal.SIGKILL)
  results = pool.step({3: w0[0], 7: w1[0]})
  assert [r.episode_id for r in results] == [3, 7]
  assert results[0].failed and results[0].done and not results[0].won
  assert "worker crashed" in results[0].reason and "-9" in results[0].reason
  assert not results[1].failed and results[1].info["changed_state"]
  assert pool.running == [7] and pool.restarts == 1

  # The replaced worker plays a new episode to a win.
  (started,) = pool.start([env_pool.PoolEpisode(11, g2)])
  assert not started.failed and pool.worker_pid(11) != victim
  for command in w2:
    (result,) = pool.step({11: command})
  assert result.won and result.done and pool.running == [7]

  # A worker that stops responding (SIGSTOP) misses the deadline, is killed and replaced.
  pool.step_timeout_s = 3.0
  os.kill(pool.worker_pid(7), signal.SIGSTOP)
  (result,) = pool.step({7: w1[1]})
  assert result.failed and "worker hung" in result.reason and pool.restarts == 2
  pool.step_timeout_s = 20.0
  (started,) = pool.start([env_pool.PoolEpisode(12, g1)])
  assert not started.failed
  idle_victim = pool.worker_pid(12)
  for command in w1:
    (result,) = pool.step({12: command})
  assert result.won and pool.running == []

  # A worker that dies between episodes is replaced before the next one starts.
  os.kill(idle_victim, signal.SIGKILL)
  _wait_until_dead(idle_victim)
  started = pool.start([env_pool.PoolEpisode(13, g0), env_pool.PoolEpisode(14, g2)])
  assert not any(r.failed for r in started), [r.reason for r in started]
  assert pool.restarts == 3
  pool.release([13, 14])
  assert pool.running == []


def test_bad_requests_are_clear(pool, tmp_path):
  pool.release(pool.running)
  with pytest.raises(KeyError, match="not running"):
    pool.step({999: "look"})
  (result,) = pool.start([env_pool.PoolEpisode(50, str(tmp_path))])
  assert result.failed and "no ALFWorld game" in result.reason
  assert 50 not in pool.running
  # More episodes than workers: the lowest ids start (and fail here: no game), the rest fail alone.
  results = pool.start([env_pool.PoolEpisode(i, str(tmp_path)) for i in (62, 60, 61)])
  assert [r.episode_id for r in results] == [60, 61, 62] and all(r.failed for r in results)
  assert ["no ALFWorld game" in r.reason for r in results] == [True, True, False]
  assert results[2].reason == "all 2 workers of the pool are running episodes"
  assert pool.running == []
  with pytest.raises(ValueError, match="new and distinct"):
    pool.start([env_pool.PoolEpisode(70, str(tmp_path))] * 2)
