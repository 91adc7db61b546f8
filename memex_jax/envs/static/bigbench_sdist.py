"""BIG-bench task files, read from the `bigbench` source distribution on PyPI.

The task data (task.json files) ships only inside the `bigbench==1.0.0` sdist. Installing that
package is not an option: its requirements pull TensorFlow, T5 and SeqIO, which this project
avoids (a TensorFlow-free install is one of its constraints). So the sdist is fetched with pip's
ordinary download command (`pip download --no-deps --no-binary :all:`, nothing is built or
installed), the few task.json files the static suites use are extracted in one streaming pass into
a cache folder, and the 350 MB archive is deleted. Later calls read the cached JSON files only.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tarfile
import tempfile
from typing import Any

from memex_jax import paths

BIGBENCH_VERSION = "1.0.0"
# Task -> its task.json files (relative to bigbench/benchmark_tasks/); logical_deduction is a
# composite of three subtasks, each with its own examples and prompt prefix.
BIGBENCH_TASK_FILES = {
    "date_understanding": ("date_understanding/task.json",),
    "logical_deduction": tuple(f"logical_deduction/{n}_objects/task.json"
                               for n in ("three", "five", "seven")),
    "object_counting": ("object_counting/task.json",),
    "strategyqa": ("strategyqa/task.json",),
}
_TASKS_IN_SDIST = f"bigbench-{BIGBENCH_VERSION}/bigbench/benchmark_tasks/"


def _download_sdist(dest: pathlib.Path) -> pathlib.Path:
  """Downloads the bigbench sdist into `dest` with pip (PyPI); returns the archive's path."""
  dest.mkdir(parents=True, exist_ok=True)
  command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             "--no-build-isolation", f"bigbench=={BIGBENCH_VERSION}", "-d", str(dest)]
  done = subprocess.run(command, capture_output=True, text=True, check=False)
  archive = dest / f"bigbench-{BIGBENCH_VERSION}.tar.gz"
  if done.returncode != 0 or not archive.is_file():
    raise RuntimeError(f"could not download the bigbench=={BIGBENCH_VERSION} sdist with "
                       f"{' '.join(command)}:\n{done.stderr[-2000:]}")
  return archive


def _extract_task_files(archive: pathlib.Path, out_dir: pathlib.Path) -> None:
  """Copies every file of BIGBENCH_TASK_FILES out of `archive`, each written atomically."""
  wanted = {_TASKS_IN_SDIST + rel: rel for rels in BIGBENCH_TASK_FILES.values() for rel in rels}
  found = set()
  with tarfile.open(archive, "r:gz") as tar:
    for member in tar:  # One streaming pass over the gzip stream.
      rel = wanted.get(member.name)
      if rel is None or not member.isfile():
        continue
      target = out_dir / rel
      target.parent.mkdir(parents=True, exist_ok=True)
      with tempfile.NamedTemporaryFile("wb", dir=target.parent, delete=False) as tmp:
        tmp.write(tar.extractfile(member).read())
      os.replace(tmp.name, target)
      found.add(rel)
  missing = set(wanted.values()) - found
  if missing:
    raise RuntimeError(f"{archive} lacks the BIG-bench task files {sorted(missing)}")


def bigbench_task_json(task: str, cache_dir: pathlib.Path | None = None) -> list[dict[str, Any]]:
  """The parsed task.json files of one BIG-bench task (one per subtask), fetching them if needed.

  Args:
    task: a key of BIGBENCH_TASK_FILES.
    cache_dir: where the extracted files are kept; default `paths.cache_root()`.

  Returns:
    The task.json contents, in BIGBENCH_TASK_FILES order.
  """
  if task not in BIGBENCH_TASK_FILES:
    raise ValueError(f"unknown BIG-bench task {task!r}; known: {sorted(BIGBENCH_TASK_FILES)}")
  root = (cache_dir or paths.cache_root()) / f"bigbench-{BIGBENCH_VERSION}"
  files = [root / rel for rel in BIGBENCH_TASK_FILES[task]]
  if not all(f.is_file() for f in files):
    archive = root / f"bigbench-{BIGBENCH_VERSION}.tar.gz"
    if not archive.is_file():
      archive = _download_sdist(root)
    _extract_task_files(archive, root)
    archive.unlink()
  parsed = []
  for f in files:
    try:
      parsed.append(json.loads(f.read_text(encoding="utf-8")))
    except json.JSONDecodeError as e:
      raise ValueError(f"{f}: not valid JSON ({e}); delete it to fetch it again") from e
  return parsed
