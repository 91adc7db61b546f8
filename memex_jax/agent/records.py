"""What trajectories leave behind: JSON lines a researcher can read, and metric summaries.

A record holds one episode's conversation (per segment), memory store, metrics and error.
Records are appended and flushed one batch at a time, so a stopped run keeps every finished
episode; a torn last line (the run was killed mid-write) is skipped when reading back.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
from typing import Any, Mapping, Sequence

import numpy as np

from memex_jax.agent.trajectory import EpisodeMetrics, Trajectory

# Every numeric field of the per-episode metrics (finish_reason is a label).
METRIC_KEYS = tuple(field.name for field in dataclasses.fields(EpisodeMetrics)
                    if field.name != "finish_reason")


def trajectory_record(trajectory: Trajectory, **extra: Any) -> dict[str, Any]:
  """One episode as a JSON-able dict; `extra` keys (e.g. the game) are added first."""
  t = trajectory
  return {**extra, "trajectory_id": t.trajectory_id, "group_id": t.group_id,
          "task": t.task_text, "metrics": t.metrics.as_dict(), "memory": t.memory,
          "error": t.error,
          "segments": [[{"role": m.role, "content": m.content} for m in s.messages]
                       for s in t.segments]}


def write_records(path: str | os.PathLike[str], records: Sequence[Mapping[str, Any]],
                  append: bool = False) -> None:
  """Writes (or appends) one JSON line per record and flushes them to disk."""
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  with path.open("a" if append else "w") as f:
    for record in records:
      f.write(json.dumps(record) + "\n")
    f.flush()
    os.fsync(f.fileno())


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
  """The records of a file ([] if missing); a torn last line is dropped, any other bad line
  raises ValueError naming it."""
  path = pathlib.Path(path)
  if not path.exists():
    return []
  lines = path.read_text().splitlines()
  records = []
  for number, line in enumerate(lines, 1):
    try:
      records.append(json.loads(line))
    except json.JSONDecodeError as e:
      if number == len(lines):
        break  # killed mid-write: the episode is played again
      raise ValueError(f"{path}:{number}: not a JSON record ({e})") from None
  return records


def summarize(metrics: Sequence[Mapping[str, Any]]) -> dict[str, float]:
  """Mean and standard error of each metric over episodes, the total penalty, finish-reason
  shares and the episode count, from `EpisodeMetrics.as_dict()` rows."""
  out: dict[str, float] = {"episodes": len(metrics)}
  for key in METRIC_KEYS:
    values = np.asarray([float(m[key]) for m in metrics])
    out[key] = float(values.mean()) if len(values) else math.nan
    out[f"{key}_se"] = (float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1
                        else 0.0)
  out["penalty"] = -(out["p_context"] + out["p_redundancy"] + out["p_format"])
  reasons = [m["finish_reason"] for m in metrics]
  for reason in sorted(set(reasons)):
    out[f"finish_{reason}"] = reasons.count(reason) / len(reasons)
  return out


def render_record(record: Mapping[str, Any]) -> str:
  """One episode's record as Markdown: its task and outcome, then each segment's messages in
  order (the system prompt left out: every segment repeats it)."""
  m = record["metrics"]
  lines = [f"# {record.get('game', record['trajectory_id'])}", "",
           f"Task: {record['task']}", "",
           f"Outcome: {m['finish_reason']}, success {bool(m['success'])}, score {m['score']:g}, "
           f"reward {m['reward']:.3f}, {m['steps']} steps, {m['num_compress']} CompressExperience, "
           f"{m['num_read']} ReadExperience, peak working context {m['peak_working']}"]
  if record.get("error"):
    lines += ["", f"Error: {record['error']}"]
  for number, segment in enumerate(record["segments"], 1):
    lines += ["", f"## Segment {number}"]
    for message in segment:
      if message["role"] != "system":
        lines += ["", f"**{message['role']}**", "", "```", message["content"].strip(), "```"]
  return "\n".join(lines) + "\n"
