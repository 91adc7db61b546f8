"""The No-Memory scores s_without on disk, keyed by executor and task.

s_without is a property of the frozen executor and the task alone (no experience enters its
prompt), so it is computed once per task and kept: a resumed run reads it back instead of
running the executor again. One JSON file holds the scores of any number of executors, each
under its own key (e.g. the model's name and decoding settings); every write is atomic.
"""

from __future__ import annotations

import json
import os
from typing import Callable, Mapping, Sequence

from memex_jax.harness import persistence

FORMAT_VERSION = 1


class ScoreCacheError(ValueError):
  """The cache file exists but cannot be read (corrupt, or another format)."""


class NoMemoryScores:
  """The s_without of every task an executor has solved without experience.

  Attributes:
    path: the JSON file.
    executor_key: names the executor (scores of another key are kept but never read).
    scores: task id -> s_without for this executor.
    computed: tasks whose score this process computed (not read from the file).
  """

  def __init__(self, path: str | os.PathLike[str], executor_key: str):
    self.path, self.executor_key = os.fspath(path), executor_key
    self._all = self._read()
    self.scores: dict[str, float] = self._all.setdefault(executor_key, {})
    self.computed = 0

  def _read(self) -> dict[str, dict[str, float]]:
    if not os.path.exists(self.path):
      return {}
    try:
      with open(self.path, encoding="utf-8") as f:
        data = json.load(f)
      if data.get("format_version") != FORMAT_VERSION or not isinstance(data.get("scores"), dict):
        raise ValueError(f"format version {data.get('format_version')!r}, expected "
                         f"{FORMAT_VERSION} with a 'scores' object")
      return {key: {task: float(s) for task, s in tasks.items()}
              for key, tasks in data["scores"].items()}
    except (OSError, ValueError, AttributeError, TypeError) as error:
      raise ScoreCacheError(f"{self.path}: cannot read the s_without cache ({error}); delete it "
                            "to recompute the No-Memory scores") from error

  def missing(self, task_ids: Sequence[str]) -> list[str]:
    """The task ids without a cached score, in order, without repeats."""
    return list(dict.fromkeys(t for t in task_ids if t not in self.scores))

  def get_or_compute(self, task_ids: Sequence[str],
                     compute: Callable[[Sequence[str]], Mapping[str, float]]) -> list[float]:
    """s_without of each task; `compute(missing ids) -> {id: score}` runs only for the missing
    ones, whose scores are saved before returning."""
    missing = self.missing(task_ids)
    if missing:
      fresh = compute(missing)
      absent = [t for t in missing if t not in fresh]
      if absent:
        raise ValueError(f"compute returned no score for tasks {absent[:5]}")
      self.scores.update({t: float(fresh[t]) for t in missing})
      self.computed += len(missing)
      self.save()
    return [self.scores[t] for t in task_ids]

  def save(self) -> None:
    """Writes the file atomically (a crash leaves the previous file or the new one)."""
    data = json.dumps({"format_version": FORMAT_VERSION, "scores": self._all}, sort_keys=True)
    persistence.write_atomically(self.path, lambda f: f.write(data.encode("utf-8")))
