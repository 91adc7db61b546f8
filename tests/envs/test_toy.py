"""VaultEnv: deterministic, the note is readable once, only the right code opens the vault."""

import pytest

from memex_jax.envs.base import Env
from memex_jax.envs.toy import VaultEnv, VaultTask, vault_code


def _walk_to_vault(env, task):
  for _ in range(task.corridor_length + 1):
    observation, done, won, info = env.step("go east")
    assert info["changed_state"] and not done and not won
  return observation


def test_reset_is_deterministic_and_implements_env():
  task = VaultTask(seed=5, corridor_length=2)
  assert isinstance(VaultEnv(), Env)
  assert VaultEnv().reset(task) == VaultEnv().reset(task)
  task_text, first = VaultEnv().reset(task)
  assert "enter <code>" in task_text and "folded note" in first
  assert vault_code(5) == vault_code(5) != vault_code(6)
  assert VaultEnv().reset(task)[1] != VaultEnv().reset(VaultTask(seed=6, corridor_length=2))[1]


def test_note_gives_the_code_once():
  env = VaultEnv()
  env.reset(VaultTask(seed=1))
  observation, done, won, info = env.step("read note")
  assert f"Vault code: {vault_code(1)}." in observation
  assert info["changed_state"] and env.changes_state("read note") and not done and not won
  observation, _, _, info = env.step("Read  Note")
  assert observation == "There is no note here." and not info["changed_state"]
  assert not env.changes_state("read note")


def test_right_code_wins_wrong_code_loses():
  task = VaultTask(seed=2, corridor_length=2)
  env = VaultEnv()
  env.reset(task)
  assert env.step(f"enter {vault_code(2)}")[0] == "There is no vault here."
  assert "vault door" in _walk_to_vault(env, task)
  observation, done, won, info = env.step(f"enter {vault_code(2).lower()}")
  assert done and won and info["changed_state"] and "swings open" in observation
  assert env.step("look") == ("The episode is over.", True, False, {"changed_state": False})
  env.reset(task)
  _walk_to_vault(env, task)
  observation, done, won, _ = env.step("enter AAA-0000")
  assert done and not won and "wrong code" in observation


def test_walls_looks_and_unknown_commands_change_nothing():
  env = VaultEnv()
  _, first = env.reset(VaultTask(seed=3))
  assert env.step("go west")[3] == {"changed_state": False}
  assert env.step("look")[0] == first
  observation, done, _, info = env.step("dance")
  assert "Unknown command 'dance'" in observation and not done and not info["changed_state"]


def test_misuse_is_reported():
  env = VaultEnv()
  with pytest.raises(RuntimeError, match="before reset"):
    env.step("look")
  with pytest.raises(TypeError, match="takes a VaultTask"):
    env.reset("seed 3")
  with pytest.raises(ValueError, match="corridor_length >= 1"):
    VaultTask(seed=1, corridor_length=0)
