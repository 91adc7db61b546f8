"""Hostile snippets stay inside the sandbox and leave the test machine unharmed."""

import json
import os
import pathlib
import socket
import subprocess

import pytest

from memex_jax.envs.static import sandbox

_FAST = sandbox.SandboxLimits(wall_time_s=3.0, cpu_time_s=5)
_AS_ROOT = os.geteuid() == 0


def _processes_of(uid: int) -> set[int]:
  pids = set()
  for status in pathlib.Path("/proc").glob("[0-9]*/status"):
    try:
      lines = status.read_text().splitlines()
    except OSError:  # The process exited while being read.
      continue
    uids = next((line.split()[1:] for line in lines if line.startswith("Uid:")), [])
    if uids and int(uids[0]) == uid:
      pids.add(int(status.parent.name))
  return pids


def test_well_behaved_code_passes_and_reports_its_output():
  result = sandbox.run_python("import sys\nprint(sum(range(10)))\nprint('warn', file=sys.stderr)")
  assert result.passed and result.reason == "ok" and result.returncode == 0
  assert result.stdout == "45\n" and result.stderr == "warn\n"


def test_failing_code_is_scored_not_raised():
  result = sandbox.run_python("assert 1 + 1 == 3, 'wrong sum'")
  assert not result.passed and result.reason == "exit 1"
  assert "AssertionError: wrong sum" in result.stderr


def test_runs_unprivileged_in_a_fresh_folder_with_a_scrubbed_environment():
  result = sandbox.run_python(
      "import os, json\nprint(json.dumps([os.getuid(), os.getcwd(), sorted(os.environ)]))")
  uid, cwd, env_names = json.loads(result.stdout)
  assert uid != 0 and uid == result.uid
  assert pathlib.Path(cwd).name == "work" and not pathlib.Path(cwd).exists()  # Removed after.
  assert env_names == ["HOME", "LANG", "PATH", "PYTHONHASHSEED"]


def test_infinite_loop_is_killed_at_the_wall_time_limit():
  result = sandbox.run_python("while True:\n  pass", _FAST)
  assert result.timed_out and not result.passed and result.reason == "timeout"
  assert _FAST.wall_time_s <= result.wall_time_s < _FAST.wall_time_s + 5


def test_huge_allocation_hits_the_memory_limit():
  result = sandbox.run_python("blob = bytearray(64 * 2**30)\nprint('allocated')", _FAST)
  assert not result.passed and result.reason == "memory_limit"
  assert "allocated" not in result.stdout


@pytest.mark.skipif(not _AS_ROOT, reason="needs root to drop to uid 65534 (process limits)")
def test_fork_bomb_is_contained_and_leaves_no_process_behind():
  before = _processes_of(sandbox.NOBODY_ID)
  bomb = "import os\nwhile True:\n  try:\n    os.fork()\n  except OSError:\n    pass"
  result = sandbox.run_python(bomb, _FAST)
  assert not result.passed and result.timed_out
  assert _processes_of(sandbox.NOBODY_ID) <= before  # Every forked copy is gone.
  # The machine can still start processes, inside and outside the sandbox.
  assert subprocess.run(["true"], check=False).returncode == 0
  assert sandbox.run_python("print('alive')").stdout == "alive\n"


@pytest.mark.skipif(not _AS_ROOT, reason="needs root to run the code as another uid")
def test_write_outside_its_folder_fails(tmp_path):
  # pytest's tmp_path is private to root: root could write there, `nobody` cannot.
  target = tmp_path / "escaped.txt"
  repo_target = pathlib.Path(sandbox.__file__).with_name("escaped.txt")
  source = "\n".join([
      "import sys",
      "failures = 0",
      f"for path in [{str(target)!r}, {str(repo_target)!r}]:",
      "  try:",
      "    open(path, 'w').write('pwned')",
      "  except OSError as e:",
      "    failures += 1",
      "    print(type(e).__name__)",
      "open('inside.txt', 'w').write('fine')",
      "sys.exit(0 if failures == 2 else 1)",
  ])
  result = sandbox.run_python(source, _FAST)
  assert result.passed, result.stderr
  assert result.stdout.split() == ["PermissionError", "PermissionError"]
  assert not target.exists() and not repo_target.exists()


def test_network_access_fails():
  if not sandbox.run_python("pass").network_isolated:
    pytest.skip("unshare cannot create a network namespace here")
  with socket.create_server(("127.0.0.1", 0)) as server:
    port = server.getsockname()[1]
    server.settimeout(0.5)
    source = "\n".join([
        "import socket",
        "try:",
        f"  socket.create_connection(('127.0.0.1', {port}), timeout=2)",
        "  print('connected')",
        "except OSError as e:",
        "  print('blocked', type(e).__name__)",
    ])
    result = sandbox.run_python(source, _FAST)
    assert result.stdout.startswith("blocked"), result.stdout
    with pytest.raises(TimeoutError):  # The host-side server never saw a connection.
      server.accept()
