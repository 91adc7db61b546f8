"""The trainer's handle on one AppWorld worker: a `worker.py` process in the AppWorld venv,
reached over loopback HTTP with a deadline on every call.

The worker dies with its parent (PR_SET_PDEATHSIG), so a pool worker that is killed takes its
AppWorld process along; a call that misses its deadline kills the worker's whole process group.
Linux delivers that signal when the starting *thread* ends: start workers from a long-lived
thread (the main thread, as the agent loop and the pool do), not from a short-lived one.
"""

from __future__ import annotations

import ctypes
import http.client
import json
import os
import pathlib
import signal
import subprocess
import tempfile
import time
from typing import Any

from memex_jax.envs.appworld import install

WORKER_SCRIPT = pathlib.Path(__file__).with_name("worker.py")
_PR_SET_PDEATHSIG = 1
_LOG_TAIL_CHARS = 2000


class WorkerError(RuntimeError):
  """The worker could not start, died, hung or refused a call; the message says which."""


def _die_with_parent() -> None:
  """Runs in the child before exec: SIGKILL it when the parent process goes away."""
  ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class WorkerProcess:
  """One live worker serving the AppWorld data under `root` (the folder holding `data/`)."""

  def __init__(self, root: str, start_timeout_s: float = 120.0, python: str | None = None):
    self.root = str(pathlib.Path(root).resolve())
    self._folder = tempfile.TemporaryDirectory(prefix="appworld_worker_")
    self._log_path = os.path.join(self._folder.name, "worker.log")
    port_file = os.path.join(self._folder.name, "port")
    environment = {**install.engine_environment(self.root), "PYTHONUNBUFFERED": "1"}
    python = python or str(install.venv_python())
    try:
      with open(self._log_path, "wb") as log:
        self.process = subprocess.Popen(
            [python, str(WORKER_SCRIPT), "--port-file", port_file, "--outputs",
             os.path.join(self._folder.name, "outputs")], cwd=self.root,
            env=environment, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=_die_with_parent)
    except OSError as e:
      self._folder.cleanup()
      raise WorkerError(f"cannot run AppWorld's interpreter {python} ({e}); create it with "
                        "`python -m memex_jax.envs.appworld.install`") from e
    deadline = time.monotonic() + start_timeout_s
    while not os.path.exists(port_file):
      if self.process.poll() is not None or time.monotonic() > deadline:
        why = (f"exited with code {self.process.returncode}" if self.process.poll() is not None
               else f"did not listen within {start_timeout_s:.0f} s")
        tail = self.log_tail()
        self.close()
        raise WorkerError(f"AppWorld worker {why}: {tail}")
      time.sleep(0.05)
    with open(port_file) as f:
      self.port = int(f.read())

  @property
  def alive(self) -> bool:
    return self.process.poll() is None

  def call(self, route: str, timeout_s: float, **request: Any) -> dict[str, Any]:
    """POSTs `request` to /route; returns the reply, or kills the worker and raises WorkerError.

    A refusal by the worker (an error inside AppWorld, reply `ok: false`) raises WorkerError
    without killing it.
    """
    body = json.dumps(request)
    connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout_s)
    try:
      connection.request("POST", f"/{route}", body, {"Content-Type": "application/json"})
      reply = json.loads(connection.getresponse().read())
    except TimeoutError as e:
      self.kill()
      raise WorkerError(f"AppWorld worker hung: /{route} gave no reply within "
                        f"{timeout_s:.1f} s") from e
    except (OSError, http.client.HTTPException, ValueError) as e:
      self.kill()
      raise WorkerError(f"AppWorld worker died during /{route} "
                        f"(exit code {self.process.poll()}): {type(e).__name__}: {e}") from e
    finally:
      connection.close()
    if not reply.get("ok"):
      raise WorkerError(f"AppWorld refused /{route}: {reply.get('error')}")
    return reply

  def log_tail(self) -> str:
    try:
      with open(self._log_path, errors="replace") as f:
        return f.read()[-_LOG_TAIL_CHARS:]
    except OSError:
      return ""

  def kill(self) -> None:
    """Kills the worker and everything it started."""
    if self.process.poll() is None:
      try:
        os.killpg(self.process.pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
    self.process.wait(timeout=30)

  def close(self) -> None:
    self.kill()
    self._folder.cleanup()
