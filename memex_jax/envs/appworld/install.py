"""Creates (once) and caches the AppWorld engine's own virtual environment.

AppWorld pins pydantic<2 and python-multipart<0.0.10 and freezes the process clock while a world
is open, so it never shares the trainer's interpreter: it lives in a separate venv under
`$MEMEX_JAX_CACHE/appworld` (default ~/.cache/memex_jax/appworld) and runs only in worker
processes. `appworld install` decrypts the real apps offline; the decrypted code, the API docs
and the empty base databases built from it stay in the cache, never in the repository.

  python -m memex_jax.envs.appworld.install
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pathlib
import shutil
import subprocess
import sys
import time

from memex_jax import paths

APPWORLD_VERSION = "0.1.3.post1"
BUILD_SCRIPT = pathlib.Path(__file__).with_name("build.py")
_READY = "ready"  # marker file: present only after a complete install


def cache_dir() -> pathlib.Path:
  """Where the venv and the engine's own files live."""
  return paths.cache_root() / "appworld"


def venv_python(cache: pathlib.Path | None = None) -> pathlib.Path:
  return (cache or cache_dir()) / "venv" / "bin" / "python"


def base_root(cache: pathlib.Path | None = None) -> pathlib.Path:
  """An AppWorld root whose data/ holds the API docs and empty base databases."""
  return (cache or cache_dir()) / "base"


def engine_environment(root: str | os.PathLike, cache: pathlib.Path | None = None
                       ) -> dict[str, str]:
  """Environment variables of an AppWorld process: a minimal PATH/HOME, the data root, and
  AppWorld's own cache (its unpacked tests) inside ours rather than under ~/.appworld."""
  return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/"),
          "APPWORLD_ROOT": str(root), "APPWORLD_CACHE": str((cache or cache_dir()) / "engine")}


def _run(command: list[str], log, environment: dict[str, str] | None = None) -> None:
  log(" ".join(command))
  subprocess.run(command, check=True, env=environment)


def ensure_installed(cache: pathlib.Path | None = None, log=print) -> pathlib.Path:
  """Builds the venv and decrypts the apps unless already done; returns its python.

  Safe to call from several processes at once (a file lock serialises the build); a build that
  died midway is redone from scratch.
  """
  cache = cache or cache_dir()
  cache.mkdir(parents=True, exist_ok=True)
  python = venv_python(cache)
  with open(cache / "install.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    marker = cache / _READY
    if marker.exists() and marker.read_text().strip() == APPWORLD_VERSION and python.exists():
      return python
    start = time.monotonic()
    shutil.rmtree(cache / "venv", ignore_errors=True)
    _run([sys.executable, "-m", "venv", str(cache / "venv")], log)
    _run([str(python), "-m", "pip", "install", "-q", f"appworld=={APPWORLD_VERSION}"], log)
    # API docs and base databases depend only on the engine: built once, copied per world.
    shutil.rmtree(base_root(cache), ignore_errors=True)
    os.makedirs(base_root(cache) / "data")
    environment = engine_environment(base_root(cache), cache)
    # `appworld install` decrypts the apps inside the venv's site-packages.
    _run([str(python.parent / "appworld"), "install"], log, environment)
    _run([str(python), str(BUILD_SCRIPT), str(base_root(cache))], log, environment)
    marker.write_text(APPWORLD_VERSION)
    log(f"AppWorld {APPWORLD_VERSION} installed in {cache} in {time.monotonic() - start:.0f} s")
  return python


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--cache", default=None, help="cache folder (default: %(default)s)")
  args = parser.parse_args(argv)
  print(ensure_installed(pathlib.Path(args.cache) if args.cache else None))


if __name__ == "__main__":
  main()
