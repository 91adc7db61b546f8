"""Every suite builds as array_record files and reads back through as_data_source, without TF."""

import sys

import pytest

from memex_jax.envs.static import bigbench_sdist
from memex_jax.envs.static import builders
from memex_jax.envs.static import sources


@pytest.mark.parametrize("suite", sources.SUITES)
def test_suite_builds_and_reads_back(suite, tmp_path, request):
  if suite in bigbench_sdist.BIGBENCH_TASK_FILES:
    request.getfixturevalue("bigbench_files")
  builder = builders.build_suite(suite, data_dir=tmp_path, max_examples=12)
  files = sorted(p.name for p in (tmp_path).rglob("*.array_record*"))
  assert files, "no array_record files written"
  source = builder.as_data_source(split=builders.SPLIT)
  assert len(source) == 12
  records = [sources.TaskRecord.from_example(source[i]) for i in range(len(source))]
  assert {r.suite for r in records} == {suite}
  assert len({r.id for r in records}) == 12 and all(r.prompt and r.answer for r in records)
  assert "metric" in records[0].metadata
  assert "tensorflow" not in sys.modules


def test_load_suite_keeps_source_order_and_mmlu_counts_dropped_rows(tmp_path):
  source = builders.load_suite("mmlu", data_dir=tmp_path, split="test[:3]")
  expected, dropped = sources.mmlu_records()
  assert [sources.TaskRecord.from_example(x) for x in source] == expected[:3]
  builder = builders.suite_builder("mmlu", data_dir=tmp_path)
  assert builder.info.metadata["dropped_rows"] == dropped == 2
  assert builder.info.splits[builders.SPLIT].num_examples == 14042


def test_unknown_suite_is_refused(tmp_path):
  with pytest.raises(ValueError, match="unknown static suite 'gsm8k'"):
    builders.suite_builder("gsm8k", tmp_path)
