"""Runs untrusted Python (model-written code) in a contained subprocess, never in-process.

Containment, layer by layer:
- a fresh temporary folder as the working directory, owned by (and only writable by) the
  unprivileged user, removed afterwards; the environment is scrubbed to a few fixed variables;
- when the caller is root, the code runs as `nobody` (uid/gid 65534, no supplementary groups):
  root ignores RLIMIT_NPROC and may write anywhere, `nobody` cannot write the caller's files;
- resource limits (`sandbox_child.py`): address space (huge allocations fail with MemoryError),
  process count (fork bombs stop growing), file size, CPU seconds, no core dumps;
- `unshare --net --pid --fork --kill-child` (util-linux) when the kernel allows it: a network
  namespace with only a downed loopback (no network at all), and a pid namespace so that killing
  its first process kills every process the code started, even ones that called setsid().
  As non-root, a user namespace (`--user --map-root-user`) is tried for the same effect;
- a wall-clock limit: on expiry the whole process group is SIGKILLed.

Known gaps, reported rather than hidden: world-writable folders (/tmp, /dev/shm) stay writable by
`nobody`; without root the code runs as the caller's own uid (the caller's files are then
writable); without unshare there is no network isolation (`SandboxResult.network_isolated`).
RLIMIT_NPROC counts every process of the uid, so concurrent sandboxes share one process budget.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import pathlib
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

NOBODY_ID = 65534
_CHILD = pathlib.Path(__file__).with_name("sandbox_child.py")
_NAMESPACE_FLAGS = ("--net", "--pid", "--fork", "--kill-child")
_TAIL_CHARS = 4000


@dataclasses.dataclass(frozen=True)
class SandboxLimits:
  """Resource limits of one sandboxed run.

  Attributes:
    wall_time_s: wall-clock seconds before the whole process tree is killed.
    cpu_time_s: CPU seconds per process (RLIMIT_CPU), a backstop behind the wall limit.
    memory_bytes: address-space limit per process (RLIMIT_AS).
    max_processes: process limit of the sandbox uid (RLIMIT_NPROC).
    max_file_bytes: largest file the code may write, stdout/stderr included (RLIMIT_FSIZE).
  """

  wall_time_s: float = 10.0
  cpu_time_s: int = 10
  memory_bytes: int = 1 << 30
  max_processes: int = 32
  max_file_bytes: int = 16 << 20


@dataclasses.dataclass(frozen=True)
class SandboxResult:
  """What happened to one sandboxed run.

  Attributes:
    passed: the code exited with status 0 within the limits.
    timed_out: the wall-clock limit killed it.
    returncode: exit status (negative: killed by that signal); None when timed out.
    stdout: the last characters of its standard output.
    stderr: the last characters of its standard error.
    reason: "ok", "timeout", "memory_limit", "cpu_limit", "file_size_limit", "signal N" or
      "exit N".
    network_isolated: it ran in its own (empty) network namespace.
    uid: the uid the code ran as (never 0 when the caller is root).
    wall_time_s: seconds from start to exit or kill.
  """

  passed: bool
  timed_out: bool
  returncode: int | None
  stdout: str
  stderr: str
  reason: str
  network_isolated: bool
  uid: int
  wall_time_s: float


@functools.cache
def _namespace_prefix(as_root: bool) -> tuple[str, ...]:
  """The `unshare` command line that isolates network and pids here, or () if none works."""
  unshare = shutil.which("unshare")
  if unshare is None:
    return ()
  flags = _NAMESPACE_FLAGS if as_root else ("--user", "--map-root-user", *_NAMESPACE_FLAGS)
  prefix = (unshare, *flags, "--")
  try:
    probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=10, check=False)
  except (OSError, subprocess.SubprocessError):
    return ()
  return prefix if probe.returncode == 0 else ()


def _reachable_by_others(path: str) -> bool:
  """Whether a user with no relation to the file's owners can execute `path`."""
  resolved = pathlib.Path(path).resolve()
  if not resolved.is_file() or not resolved.stat().st_mode & stat.S_IXOTH:
    return False
  return all(parent.stat().st_mode & stat.S_IXOTH for parent in resolved.parents)


@functools.cache
def sandbox_interpreter(drop_privileges: bool) -> str:
  """The Python interpreter the sandboxed code runs under.

  The caller's own interpreter when the sandbox user can reach it; as `nobody` that fails for
  interpreters under a private home (e.g. /root/.pyenv), so a system Python is used instead.
  """
  candidates = [sys.executable]
  if drop_privileges:
    candidates += ["/usr/bin/python3", "/usr/local/bin/python3", shutil.which("python3") or ""]
  for candidate in candidates:
    if candidate and (not drop_privileges or _reachable_by_others(candidate)):
      return candidate
  raise RuntimeError(
      f"sandbox: no Python interpreter executable by uid {NOBODY_ID}; tried {candidates}")


def _tail(path: pathlib.Path) -> str:
  with open(path, "rb") as f:
    f.seek(max(0, os.path.getsize(path) - 4 * _TAIL_CHARS))
    return f.read().decode("utf-8", errors="replace")[-_TAIL_CHARS:]


def _reason(returncode: int | None, stderr: str) -> str:
  if returncode is None:
    return "timeout"
  if returncode == 0:
    return "ok"
  if "MemoryError" in stderr:
    return "memory_limit"
  if returncode in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
    return "cpu_limit"
  if returncode in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ) or "File too large" in stderr:
    return "file_size_limit"
  return f"signal {-returncode}" if returncode < 0 else f"exit {returncode}"


def _kill_tree(proc: subprocess.Popen[bytes], namespaced: bool) -> None:
  """Kills every process the run started and returns once they are gone.

  In a pid namespace, the kernel kills all its processes when its first process dies, and that
  process is only reaped (letting `unshare` exit) once the namespace is empty: killing it and then
  waiting for `unshare` frees the uid's process budget before the next run. The process-group kill
  covers runs without namespaces.
  """
  if namespaced and proc.poll() is None:
    try:
      children = pathlib.Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    except OSError:
      children = []
    for pid in children:
      try:
        os.kill(int(pid), signal.SIGKILL)
      except ProcessLookupError:
        pass
    try:
      proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
      pass
  try:
    os.killpg(proc.pid, signal.SIGKILL)
  except ProcessLookupError:
    pass
  proc.wait()


def run_python(source: str, limits: SandboxLimits = SandboxLimits()) -> SandboxResult:
  """Runs `source` as a Python script in the sandbox and reports how it ended.

  Args:
    source: the whole program; its exit status decides `passed`.
    limits: resource limits of this run.

  Returns:
    The run's SandboxResult. Never raises for anything the code itself does.
  """
  as_root = os.geteuid() == 0
  prefix = _namespace_prefix(as_root)
  with tempfile.TemporaryDirectory(prefix="memex_sandbox_") as host_dir:
    host = pathlib.Path(host_dir)  # Caller-owned: the code's stdout/stderr files live here.
    workdir = host / "work"
    workdir.mkdir(mode=0o700)
    script = workdir / "main.py"
    script.write_text(source, encoding="utf-8")
    if as_root:
      os.chmod(host, 0o711)  # `nobody` may pass through to its folder, but not list or write.
      os.chown(workdir, NOBODY_ID, NOBODY_ID)
      os.chown(script, NOBODY_ID, NOBODY_ID)
    config = {
        "interpreter": sandbox_interpreter(as_root),
        "script": str(script),
        "cpu_time_s": limits.cpu_time_s,
        "memory_bytes": limits.memory_bytes,
        "max_processes": limits.max_processes,
        "max_file_bytes": limits.max_file_bytes,
        "uid": NOBODY_ID if as_root else None,
        "gid": NOBODY_ID if as_root else None,
        "env": {"PATH": "/usr/bin:/bin", "HOME": str(workdir), "LANG": "C.UTF-8",
                "PYTHONHASHSEED": "0"},
    }
    command = [*prefix, sys.executable, "-I", str(_CHILD), json.dumps(config)]
    out_path, err_path = host / "stdout", host / "stderr"
    start = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
      proc = subprocess.Popen(command, cwd=workdir, env={}, stdin=subprocess.DEVNULL, stdout=out,
                              stderr=err, start_new_session=True)
      try:
        returncode = proc.wait(timeout=limits.wall_time_s)
      except subprocess.TimeoutExpired:
        returncode = None
      finally:
        _kill_tree(proc, namespaced=bool(prefix))
    elapsed = time.monotonic() - start
    stdout, stderr = _tail(out_path), _tail(err_path)
  return SandboxResult(
      passed=returncode == 0, timed_out=returncode is None, returncode=returncode,
      stdout=stdout, stderr=stderr, reason=_reason(returncode, stderr),
      network_isolated=bool(prefix), uid=NOBODY_ID if as_root else os.getuid(),
      wall_time_s=elapsed)
