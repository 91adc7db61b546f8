"""BIG-bench task files come from the bigbench sdist via pip, cached, with clear errors."""

import shutil

import pytest

from memex_jax import paths
from memex_jax.envs.static import bigbench_sdist


def test_unknown_task_is_refused():
  with pytest.raises(ValueError, match="unknown BIG-bench task 'arithmetic'"):
    bigbench_sdist.bigbench_task_json("arithmetic")


def test_cached_task_files_parse(bigbench_files):
  specs = bigbench_sdist.bigbench_task_json("logical_deduction")  # Fetches once if needed.
  assert [s["name"] for s in specs] == ["three_objects", "five_objects", "seven_objects"]
  assert all(s["preferred_score"] == "multiple_choice_grade" for s in specs)


def test_corrupt_cached_file_names_itself(tmp_path, bigbench_files):
  bigbench_sdist.bigbench_task_json("object_counting")
  source = paths.cache_root() / f"bigbench-{bigbench_sdist.BIGBENCH_VERSION}"
  shutil.copytree(source, tmp_path / source.name)
  broken = tmp_path / source.name / "object_counting" / "task.json"
  broken.write_text("{not json")
  with pytest.raises(ValueError, match="object_counting/task.json: not valid JSON"):
    bigbench_sdist.bigbench_task_json("object_counting", cache_dir=tmp_path)


@pytest.mark.slow
def test_fresh_cache_downloads_the_sdist_and_keeps_only_task_files(tmp_path, bigbench_files):
  specs = bigbench_sdist.bigbench_task_json("strategyqa", cache_dir=tmp_path)
  assert len(specs[0]["examples"]) == 2290
  root = tmp_path / f"bigbench-{bigbench_sdist.BIGBENCH_VERSION}"
  kept = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
  assert kept == sorted(rel for rels in bigbench_sdist.BIGBENCH_TASK_FILES.values()
                        for rel in rels)
