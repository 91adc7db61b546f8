"""launch/device_env.sh: the carried wheels install; a wheel split over two carries, once whole;
a corrupt carry stops with an error."""

import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

SCRIPT = pathlib.Path(__file__).parents[2] / "launch" / "device_env.sh"


def _wheel(folder: pathlib.Path, name: str, payload: bytes = b"") -> pathlib.Path:
  """A minimal pure-Python wheel (no build backend needed), with an optional data file."""
  dist = f"{name}-0.1.dist-info"
  path = folder / f"{name}-0.1-py3-none-any.whl"
  with zipfile.ZipFile(path, "w") as wheel:
    wheel.writestr(f"{name}/__init__.py", f"VALUE = {name!r}\n")
    wheel.writestr(f"{name}/data.bin", payload)
    wheel.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    wheel.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                   "Root-Is-Purelib: true\nTag: py3-none-any\n")
    wheel.writestr(f"{dist}/RECORD", "")
  return path


def _source(repo: pathlib.Path, then: str) -> subprocess.CompletedProcess:
  env = {**os.environ, "PYTHON": sys.executable, "SITE": str(repo / "site")}
  return subprocess.run(["bash", "-c", f"source launch/device_env.sh && {then}"], cwd=repo,
                        env=env, capture_output=True, text=True, timeout=300)


def test_joins_the_split_wheel_once_every_part_is_there(tmp_path):
  (tmp_path / "launch").mkdir()
  shutil.copy(SCRIPT, tmp_path / "launch")
  missing = _source(tmp_path, "true")
  assert missing.returncode == 2 and "run launch/gpu_wheels.sh" in missing.stderr
  (tmp_path / ".whl").mkdir()
  _wheel(tmp_path / ".whl", "carried_small")
  payload = os.urandom(300_000)  # incompressible, so the wheel really spans both parts
  big = _wheel(tmp_path, "carried_big", payload)
  data = big.read_bytes()
  imports = (f"{sys.executable} -c 'import carried_small, pathlib, importlib.util as u; "
             "print(carried_small.VALUE, u.find_spec(\"carried_big\") and pathlib.Path("
             "u.find_spec(\"carried_big\").origin).parent.joinpath(\"data.bin\").stat().st_size)'")
  # The first call carries part a only: the small wheels install, the weights wait.
  (tmp_path / ".weights" / "a").mkdir(parents=True)
  (tmp_path / ".weights" / "a" / f"{big.name}.part-aa").write_bytes(data[:len(data) // 2])
  first = _source(tmp_path, imports)
  assert first.returncode == 0, first.stderr
  assert first.stdout.split() == ["carried_small", "None"]
  assert "not all here yet" in first.stderr
  # The second call brings the rest and the whole wheel's digest.
  (tmp_path / ".weights" / "b").mkdir()
  (tmp_path / ".weights" / "b" / f"{big.name}.part-ab").write_bytes(data[len(data) // 2:])
  (tmp_path / ".weights" / "b" / "SHA256").write_text(hashlib.sha256(data).hexdigest() + "\n")
  done = _source(tmp_path, imports)
  assert done.returncode == 0, done.stderr
  assert done.stdout.split() == ["carried_small", str(len(payload))]
  # A part changed in transit: the digest check stops the script.
  (tmp_path / ".weights" / "b" / f"{big.name}.part-ab").write_bytes(b"x" + data[len(data) // 2:])
  corrupt = _source(tmp_path, imports)
  assert corrupt.returncode == 2 and "do not match .weights/b/SHA256" in corrupt.stderr
  assert corrupt.stdout == ""
