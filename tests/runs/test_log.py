"""Metrics JSONL + TensorBoard: appended, typed, robust to a torn last line."""

import numpy as np

from memex_jax.runs import log as run_log


def test_write_and_read_back(tmp_path):
  log = run_log.RunLog(tmp_path)
  log.write(1, {"success": np.float32(0.5), "reward": 0.25, "finish": "max_steps"})
  log.write(2, {"success": 1.0}, kind="eval")
  log.close()
  assert [r["step"] for r in run_log.read_log(tmp_path / run_log.METRICS_FILE)] == [1, 2]
  [train] = run_log.read_log(tmp_path / run_log.METRICS_FILE, kind="train")
  assert train["success"] == 0.5 and isinstance(train["success"], float)
  assert any((tmp_path / "tensorboard").iterdir())


def test_resumed_run_appends_and_torn_line_is_skipped(tmp_path):
  run_log.RunLog(tmp_path, tensorboard=False).write(1, {"x": 1})
  with (tmp_path / run_log.METRICS_FILE).open("a") as f:
    f.write('{"step": 2, "kind": "tr')  # killed mid-write
  run_log.RunLog(tmp_path, tensorboard=False).write(3, {"x": 3})
  records = run_log.read_log(tmp_path / run_log.METRICS_FILE)
  assert [r["step"] for r in records] == [1, 3]

