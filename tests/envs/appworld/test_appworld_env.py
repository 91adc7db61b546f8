"""AppWorldEnv on the real engine: the Env seam, state-change detection and fault handling."""

import dataclasses
import os
import signal
import time

import psutil
import pytest

from memex_jax.envs import base
from memex_jax.envs.appworld import env as appworld_env
from memex_jax.envs.appworld import server

READ_NOTES = ("tok = apis.simple_note.login(username=apis.supervisor.show_profile()['email'], "
              "password={a['account_name']: a['password'] for a in "
              "apis.supervisor.show_account_passwords()}['simple_note'])['access_token']\n"
              "notes = apis.simple_note.search_notes(access_token=tok, page_limit=20)\n"
              "print(len(notes))")


@pytest.fixture
def env(shared_env):
  """The shared env with short limits (its worker reads AppWorld's timeout at each reset)."""
  config = shared_env.config
  shared_env.config = dataclasses.replace(config, max_steps=7, call_timeout_s=2, call_margin_s=3,
                                          max_observation_chars=200)
  yield shared_env
  shared_env.config = config


def test_split_task_and_clip():
  assert appworld_env.split_task("/r/data/tasks/train0_1") == ("/r", "train0_1")
  with pytest.raises(ValueError, match="data/tasks"):
    appworld_env.split_task("/r/tasks/train0_1")
  assert appworld_env.clip("abc", 3) == "abc"
  clipped = appworld_env.clip("x" * 4, 10)
  assert clipped.startswith("xxxx\n") and "first 4 of 10 characters" in clipped


def test_episode_state_changes_and_step_limit(env, task_by_type):
  assert isinstance(env, base.Env)
  with pytest.raises(RuntimeError, match="before reset"):
    appworld_env.AppWorldEnv().step("print(1)")
  task = task_by_type["note_pin"]
  instruction, first = env.reset(task)
  assert instruction.startswith("In SimpleNote, pin every note")
  assert "simple_note" in first and "complete_task" in first

  observation, done, won, info = env.step(READ_NOTES)
  assert observation.strip() == "8" and not done and not won
  # Logging in is a POST, but it leaves the databases as they were.
  assert info["writes"] == ["POST /simple_note/auth/token"]
  assert not info["changed_state"] and not env.changes_state(READ_NOTES)

  update = "apis.simple_note.update_note(access_token=tok, note_id=1, content='changed')"
  _, _, _, info = env.step(update)
  assert info["changed_state"] and env.changes_state(update)
  assert info["writes"] == ["PATCH /simple_note/notes/1"]
  _, _, _, info = env.step(update)  # the same write again changes nothing
  assert not info["changed_state"]

  observation, _, _, _ = env.step("print('y' * 500)")
  assert "[output clipped: showing the first 200 of 501 characters]" in observation
  # Past AppWorld's own import check, the worker's audit hook still refuses the network.
  observation, _, _, _ = env.step("s = __import__('socket').socket()\n"
                                  "s.connect(('192.0.2.1', 80))")
  assert "network access outside loopback is blocked (192.0.2.1)" in observation
  observation, done, _, _ = env.step("1/0")
  assert "ZeroDivisionError" in observation and not done
  observation, done, won, info = env.step("x = 1")  # the seventh step: the limit, then scoring
  assert done and not won
  checks = {c["name"]: c["passed"] for c in info["checks"]}
  assert not checks["existing notes keep their text"]
  assert 0.0 <= info["score"] < 1.0
  assert env.step("x = 2")[0] == appworld_env.EPISODE_OVER


@pytest.mark.slow
def test_appworld_timeout_then_hung_worker_then_killed_worker(env, task_by_type):
  task = task_by_type["note_lookup"]
  env.reset(task)
  # AppWorld's own per-execution limit: the code is stopped, the episode goes on.
  observation, done, _, info = env.step("while True:\n    pass")
  assert "timed out" in observation and not done and not info.get("failed")

  # Code stuck inside one C call never yields to AppWorld's alarm: the worker stops answering,
  # is killed at the call deadline, and only this episode fails.
  hung = env.worker_pid
  observation, done, won, info = env.step("x = sum(range(10 ** 13))")
  assert done and not won and info["failed"] and "hung" in info["reason"]
  assert env.worker_pid is None and not psutil.pid_exists(hung)

  # The next reset starts a fresh worker; killing that one mid-episode fails the episode.
  env.reset(task)
  assert env.worker_pid not in (None, hung)
  os.kill(env.worker_pid, signal.SIGKILL)
  time.sleep(0.2)
  observation, done, won, info = env.step("print(1)")
  assert done and not won and "died" in info["reason"]
  env.reset(task)
  assert env.step("print(2)")[0].strip() == "2"


def test_episode_time_limit(env, task_by_type):
  env.config = dataclasses.replace(env.config, episode_timeout_s=1.0)
  env.reset(task_by_type["note_lookup"])
  time.sleep(1.2)
  observation, done, won, info = env.step("print(1)")
  assert done and not won and "time limit" in info["reason"] and "time limit" in observation


def test_missing_task_and_broken_worker_fail_clearly(worlds):
  env = appworld_env.AppWorldEnv(appworld_env.AppWorldConfig(start_timeout_s=60))
  try:
    missing = os.path.join(os.path.dirname(worlds["train"][0]), "train0_99")
    with pytest.raises(ValueError, match="no specs.json"):
      env.reset(missing)
  finally:
    env.close()
  broken = appworld_env.AppWorldEnv(appworld_env.AppWorldConfig(python="/bin/false"))
  with pytest.raises(server.WorkerError, match="exited with code 1"):
    broken.reset(worlds["train"][0])
  missing_venv = appworld_env.AppWorldEnv(appworld_env.AppWorldConfig(python="/no/python"))
  with pytest.raises(server.WorkerError, match="appworld.install"):
    missing_venv.reset(worlds["train"][0])
