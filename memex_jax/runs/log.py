"""Run metrics: a JSON line per record plus TensorBoard scalars and number-list histograms."""

from __future__ import annotations

import json
import math
import pathlib
from typing import Any, Mapping

import numpy as np

METRICS_FILE = "metrics.jsonl"


class RunLog:
  """Appends metrics to `workdir/metrics.jsonl` and `workdir/tensorboard/`.

  Appending (never truncating) keeps the history of a resumed run in one file.
  """

  def __init__(self, workdir: str | pathlib.Path, tensorboard: bool = True):
    self.workdir = pathlib.Path(workdir)
    self.workdir.mkdir(parents=True, exist_ok=True)
    self.path = self.workdir / METRICS_FILE
    if _ends_mid_line(self.path):
      with self.path.open("a") as f:
        f.write("\n")  # seal a line torn by a killed run so the next record starts clean
    self._tb = None
    if tensorboard:
      from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top
      self._tb = SummaryWriter(str(self.workdir / "tensorboard"))

  def write(self, step: int, metrics: Mapping[str, Any], kind: str = "train") -> None:
    record = {"step": int(step), "kind": kind}
    record.update({k: _plain(v) for k, v in metrics.items()})
    with self.path.open("a") as f:
      f.write(json.dumps(record) + "\n")
    if self._tb is not None:
      for key, value in record.items():
        if isinstance(value, (int, float)) and key != "step" and math.isfinite(value):
          self._tb.add_scalar(f"{kind}/{key}", value, step)
        elif _is_histogram(value):  # a list of numbers, e.g. the copilot's R values
          self._tb.add_histogram(f"{kind}/{key}", np.asarray(value, np.float64), step)
      self._tb.flush()

  def close(self) -> None:
    if self._tb is not None:
      self._tb.close()


def read_log(path: str | pathlib.Path, kind: str | None = None) -> list[dict[str, Any]]:
  """Records of a metrics.jsonl file (optionally of one kind); a torn last line is skipped."""
  records = []
  for line in pathlib.Path(path).read_text().splitlines():
    try:
      record = json.loads(line)
    except json.JSONDecodeError:
      continue  # a run killed mid-write leaves at most one partial line
    if kind is None or record.get("kind") == kind:
      records.append(record)
  return records


def _is_histogram(value: Any) -> bool:
  return (isinstance(value, list) and bool(value)
          and all(isinstance(v, (int, float)) and math.isfinite(v) for v in value))


def _ends_mid_line(path: pathlib.Path) -> bool:
  """Whether a non-empty file's last byte is not a newline (read alone: the log can be long)."""
  if not path.exists() or path.stat().st_size == 0:
    return False
  with path.open("rb") as f:
    f.seek(-1, 2)
    return f.read(1) != b"\n"


def _plain(value: Any) -> Any:
  if hasattr(value, "item") and getattr(value, "size", 2) == 1:
    return value.item()
  if isinstance(value, (list, tuple)):
    return [_plain(v) for v in value]
  return value
