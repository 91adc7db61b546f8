"""AppWorld fixtures: the engine's venv (built by the project's own command on a fresh machine,
cached afterwards) and one set of generated task worlds shared by every AppWorld test."""

import pytest

from memex_jax.envs.appworld import env as appworld_env
from memex_jax.envs.appworld import generate
from memex_jax.envs.appworld import install


@pytest.fixture(scope="session")
def appworld_python():
  """The AppWorld venv's interpreter; the first run on a machine installs it (about a minute)."""
  return str(install.ensure_installed())


@pytest.fixture(scope="session")
def worlds(appworld_python, tmp_path_factory):
  """split -> task folders: 5 train tasks (one per task type) and 5 large test_challenge ones,
  built in one engine call."""
  del appworld_python
  out = tmp_path_factory.mktemp("appworld_worlds")
  return generate.generate(str(out), num=5, seed=0, splits=("train", "test_challenge"))


@pytest.fixture(scope="session")
def shared_env(worlds):
  """One AppWorldEnv (default config) whose warm worker the tests share: a reset costs ~0.2 s,
  a worker start several seconds."""
  env = appworld_env.AppWorldEnv()
  env.reset(worlds["train"][0])
  yield env
  env.close()


@pytest.fixture(scope="session")
def task_by_type(worlds):
  """task type -> its train task folder."""
  return {generate.read_json(t, "meta")["task_type"]: t for t in worlds["train"]}
