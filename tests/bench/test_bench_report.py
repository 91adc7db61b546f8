"""The benchmark JSON records what the numbers were measured on."""

import json
import os

import jax

from bench import report


def test_json_records_the_device_and_the_cpus_the_process_may_use(tmp_path):
  path = report.write_json(tmp_path / "out" / "bench.json", {"rows": [{"N": 1}]})
  record = json.loads(path.read_text())
  assert record["rows"] == [{"N": 1}]
  device = record["device"]
  assert device["backend"] == jax.default_backend() and device["jax"] == jax.__version__
  assert device["cpu_affinity"] == sorted(os.sched_getaffinity(0))
  assert set(device["cpu_affinity"]) <= set(range(device["cpu_count"]))


def test_timing_reports_the_median_and_the_fastest_call():
  calls = []
  timed = report.timing(lambda: calls.append(1) or jax.numpy.ones(3), repeats=5)
  assert len(calls) == 6  # one untimed warm-up call
  assert timed["repeats"] == 5 and 0 < timed["min_ms"] <= timed["median_ms"]
