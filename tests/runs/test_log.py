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



def _events(folder):
  """Every Event in the TensorBoard files under `folder` (TFRecord framing, read by hand)."""
  import struct  # pylint: disable=g-import-not-at-top
  from tensorboardX.proto import event_pb2  # pylint: disable=g-import-not-at-top
  out = []
  for path in sorted(folder.iterdir()):
    data = path.read_bytes()
    offset = 0
    while offset < len(data):
      (length,) = struct.unpack("<Q", data[offset:offset + 8])
      out.append(event_pb2.Event.FromString(data[offset + 12:offset + 12 + length]))
      offset += 12 + length + 4
  return out


def test_number_lists_are_kept_and_become_histograms(tmp_path):
  log = run_log.RunLog(tmp_path)
  log.write(1, {"R": [20, 50, 50, 80], "reward": 0.5, "names": ["a", "b"]})
  log.close()
  [record] = run_log.read_log(tmp_path / run_log.METRICS_FILE)
  assert record["R"] == [20, 50, 50, 80] and record["names"] == ["a", "b"]
  values = [v for e in _events(tmp_path / "tensorboard") for v in e.summary.value]
  histograms = {v.tag: v.histo for v in values if v.HasField("histo")}
  assert set(histograms) == {"train/R"}  # the list of strings is not a histogram
  assert histograms["train/R"].num == 4 and histograms["train/R"].max == 80
  assert any(v.tag == "train/reward" for v in values)
