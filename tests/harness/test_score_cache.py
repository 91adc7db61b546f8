"""The s_without cache: computed once per executor and task, read back by a new process's
instance, atomic, and a corrupt file is a clear error."""

import json

import pytest

from memex_jax.harness.score_cache import NoMemoryScores, ScoreCacheError


def test_scores_are_computed_once_and_survive_a_restart(tmp_path):
  path = tmp_path / "s_without.json"
  calls = []

  def compute(ids):
    calls.append(list(ids))
    return {i: float(len(i)) for i in ids}

  cache = NoMemoryScores(path, "smollm2/greedy")
  assert cache.get_or_compute(["a", "bb", "a"], compute) == [1.0, 2.0, 1.0]
  assert calls == [["a", "bb"]] and cache.computed == 2
  assert cache.get_or_compute(["bb", "ccc"], compute) == [2.0, 3.0]
  assert calls[-1] == ["ccc"]
  # A resumed run (a new instance on the same file) recomputes nothing.
  resumed = NoMemoryScores(path, "smollm2/greedy")
  assert resumed.get_or_compute(["a", "bb", "ccc"], compute) == [1.0, 2.0, 3.0]
  assert len(calls) == 2 and resumed.computed == 0
  # Another executor's scores are its own.
  other = NoMemoryScores(path, "qwen/greedy")
  assert other.missing(["a"]) == ["a"]
  other.get_or_compute(["a"], lambda ids: {"a": 0.0})
  assert NoMemoryScores(path, "smollm2/greedy").scores["a"] == 1.0
  assert not list(tmp_path.glob(".s_without.*"))  # no temporary file left behind


def test_a_compute_that_skips_a_task_is_refused(tmp_path):
  cache = NoMemoryScores(tmp_path / "s.json", "e")
  with pytest.raises(ValueError, match="no score for tasks"):
    cache.get_or_compute(["a", "b"], lambda ids: {"a": 1.0})


@pytest.mark.parametrize("content", ["{not json", json.dumps({"format_version": 99, "scores": {}}),
                                     json.dumps([1, 2])])
def test_a_corrupt_cache_is_a_clear_error(tmp_path, content):
  path = tmp_path / "s.json"
  path.write_text(content)
  with pytest.raises(ScoreCacheError, match="cannot read the s_without cache"):
    NoMemoryScores(path, "e")
