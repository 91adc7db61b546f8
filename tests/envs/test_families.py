"""The environment families the entry points select by `config.env.name`, on their real engines."""

import os
import subprocess
import sys

import pytest

from memex_jax.envs import families
from memex_jax.envs import pool as env_pool
from memex_jax.envs.alfworld import instructions as alfworld_instructions
from memex_jax.envs.appworld import generate as appworld_generate
from memex_jax.envs.appworld import instructions as appworld_instructions


def test_unknown_family_names_the_known_ones():
  with pytest.raises(ValueError, match=r"unknown environment family 'webshop'.*'alfworld'"):
    families.get("webshop")


def test_select_separates_the_family_from_its_pool_options():
  family, options = families.select(name="appworld", harder=False, step_timeout_s=5.0)
  assert family.name == "appworld" and options == {"harder": False, "step_timeout_s": 5.0}
  assert families.select()[0].name == "alfworld"  # the default


def test_instructions_and_split_sizes():
  assert families.get("alfworld").instructions == alfworld_instructions.INSTRUCTIONS
  assert families.get("appworld").instructions == appworld_instructions.INSTRUCTIONS
  assert families.get("alfworld").split_size("valid_seen") == 140
  assert families.get("appworld").split_size("test_challenge") == 417
  with pytest.raises(ValueError, match="appworld has no split 'valid_seen'"):
    families.get("appworld").split_size("valid_seen")


@pytest.mark.parametrize("name, engine", [("appworld", "textworld"), ("alfworld", "appworld")])
def test_a_family_never_imports_the_other_engine(name, engine):
  code = (f"import sys; from memex_jax.envs import families; f = families.get({name!r}); "
          f"f.tasks, f.make_pool, f.instructions; "
          f"print(sorted(m for m in sys.modules if {engine!r} in m))")
  run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONPATH": os.getcwd()})
  assert run.stdout.strip() == "[]"


def _first_observation(family, task):
  with family.make_pool(1, harder=True, step_timeout_s=60.0) as pool:
    [started] = pool.start([env_pool.PoolEpisode(0, task)])
  assert not started.failed, started.reason
  assert started.task_text and started.observation
  return started


def test_alfworld_tasks_and_pool(games_root):
  family = families.get("alfworld")
  games = family.tasks(dir=games_root, split="valid_seen", num=2, seed=0, workers=1)
  assert len(games) == 2
  assert "in the middle of a room" in _first_observation(family, games[0]).observation


def test_appworld_tasks_from_a_root_and_generated_once(worlds, tmp_path, monkeypatch):
  family = families.get("appworld")
  root = os.path.dirname(os.path.dirname(os.path.dirname(worlds["train"][0])))
  assert family.tasks(dir=root, split="train", num=3, seed=0, workers=1) == worlds["train"][:3]
  with pytest.raises(FileNotFoundError):
    family.tasks(dir=root, split="test_normal", num=3, seed=0, workers=1)

  monkeypatch.setattr(appworld_generate, "TASKS_CACHE", tmp_path)
  generated = family.tasks(dir="", split="test_normal", num=1, seed=3, workers=1)
  assert [os.path.dirname(t) for t in generated] == [
      str(tmp_path / "seed3_test_normal_1" / "data" / "tasks")]
  stamp = os.path.getmtime(os.path.join(generated[0], "ground_truth", "checks.json"))
  assert family.tasks(dir="", split="test_normal", num=1, seed=3, workers=1) == generated
  assert os.path.getmtime(os.path.join(generated[0], "ground_truth", "checks.json")) == stamp


def test_appworld_pool(worlds):
  started = _first_observation(families.get("appworld"), worlds["train"][0])
  assert "supervisor" in started.observation.lower()
