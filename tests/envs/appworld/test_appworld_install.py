"""The AppWorld venv: where it is cached, and what its processes are given."""

import os
import pathlib

from memex_jax.envs.appworld import install


def test_cache_honours_memex_jax_cache(monkeypatch, tmp_path):
  monkeypatch.setenv("MEMEX_JAX_CACHE", str(tmp_path))
  assert install.cache_dir() == tmp_path / "appworld"
  assert install.venv_python() == tmp_path / "appworld" / "venv" / "bin" / "python"
  environment = install.engine_environment("/data/root")
  assert environment["APPWORLD_ROOT"] == "/data/root"
  assert environment["APPWORLD_CACHE"] == str(tmp_path / "appworld" / "engine")
  assert set(environment) == {"PATH", "HOME", "APPWORLD_ROOT", "APPWORLD_CACHE"}


def test_installed_engine_is_reused(appworld_python):
  logged = []
  assert install.ensure_installed(log=logged.append) == pathlib.Path(appworld_python)
  assert not logged  # the cached venv is reused, nothing rebuilt
  base = install.base_root() / "data"
  assert (base / "api_docs" / "standard" / "venmo.json").is_file()
  assert os.path.isfile(base / "base_dbs" / "simple_note.db")
