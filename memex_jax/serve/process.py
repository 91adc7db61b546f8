"""`python -m memex_jax.serve` as a child process: started, awaited until it answers, stopped.

For benchmarks, tests and notebooks that need a real server next to them:

  with ServerProcess(["--model", "smollm2", "--num_slots", "8"]) as server:
    HttpExecutor(EndpointConfig(server.url, server.model)) ...
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Sequence


def free_port() -> int:
  """A loopback port nothing listens on (the OS's pick, released before it is used)."""
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


class ServerProcess:
  """A server on 127.0.0.1 in a child process.

  Attributes:
    url: its base URL, up to and including `/v1`.
    model: the model id it serves (read from `/v1/models` once it answers).
  """

  def __init__(self, args: Sequence[str] = (), port: int | None = None,
               startup_timeout_s: float = 300.0):
    """`args` are the server's flags (not --host/--port); the child gets one CPU JAX device."""
    self.port = port or free_port()
    self.url = f"http://127.0.0.1:{self.port}/v1"
    self.model = ""
    self._args = list(args)
    self._timeout = startup_timeout_s
    self._log = tempfile.TemporaryFile()
    self._process: subprocess.Popen | None = None

  def __enter__(self) -> ServerProcess:
    root = pathlib.Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    env.pop("XLA_FLAGS", None)  # e.g. a test session's fake devices: the server decodes unsharded
    command = [sys.executable, "-m", "memex_jax.serve", "--host", "127.0.0.1", "--port",
               str(self.port), *self._args]
    self._process = subprocess.Popen(command, env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT)
    try:
      self._await()
    except BaseException:
      self.__exit__()
      raise
    return self

  def _await(self) -> None:
    deadline = time.monotonic() + self._timeout
    while True:
      try:
        with urllib.request.urlopen(f"{self.url}/models", timeout=2) as response:
          self.model = json.loads(response.read())["data"][0]["id"]
          return
      except OSError:
        if self._process.poll() is not None or time.monotonic() > deadline:
          raise RuntimeError(f"the server did not come up on {self.url}:\n{self.output()}"
                             ) from None
        time.sleep(0.5)

  def output(self) -> str:
    """The last 3000 characters the server printed."""
    self._log.seek(0)
    return self._log.read().decode(errors="replace")[-3000:]

  def __exit__(self, *exc) -> None:
    if self._process is not None and self._process.poll() is None:
      self._process.terminate()
      try:
        self._process.wait(timeout=20)
      except subprocess.TimeoutExpired:
        self._process.kill()
        self._process.wait()
    self._log.close()
