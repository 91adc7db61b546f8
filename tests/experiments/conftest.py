"""Runs an entry point the way a user does: its own process, its config file, flag overrides."""

import os
import subprocess
import sys

import pytest


@pytest.fixture(scope="session")
def compilation_cache(tmp_path_factory) -> str:
  """One XLA compilation cache for every entry-point process of the session: they compile the
  same SmolLM2 functions, and a process that finds them cached starts ~20 s sooner."""
  return str(tmp_path_factory.mktemp("xla_cache"))


@pytest.fixture
def entry_point(compilation_cache):
  """`run(module, *flags, devices=1, config=module)`: `python -m experiments.<module>` with
  experiments/configs/<config>.py.

  The process sees `devices` CPU devices (the test session's 8 fake ones are not inherited) and
  gets `timeout` seconds (default 10 minutes); the CompletedProcess holds its exit status,
  stdout and stderr. Its compiled functions go to, and come from, the session's cache.
  """
  def run(module: str, *flags: str, devices: int = 1, config: str | None = None,
          timeout: int = 600) -> subprocess.CompletedProcess:
    xla_flags = f"--xla_force_host_platform_device_count={devices}" if devices > 1 else ""
    return subprocess.run(
        [sys.executable, "-m", f"experiments.{module}", "--config",
         f"experiments/configs/{config or module}.py", *flags],
        env={**os.environ, "XLA_FLAGS": xla_flags, "JAX_COMPILATION_CACHE_DIR": compilation_cache,
             "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"},
        capture_output=True, text=True, timeout=timeout, check=False)
  return run
