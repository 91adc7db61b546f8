"""Shared benchmark plumbing: timing compiled calls, the printed table and the JSON record."""

from __future__ import annotations

import json
import os
import pathlib
import platform
import time
from typing import Any, Callable, Sequence

import jax


def device_summary() -> dict[str, Any]:
  """What the numbers were measured on, with the CPUs the process may run on (e.g. taskset's)."""
  dev = jax.devices()[0]
  affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
  return {"backend": jax.default_backend(), "device": getattr(dev, "device_kind", str(dev)),
          "num_devices": jax.device_count(), "jax": jax.__version__, "host": platform.node(),
          "cpu_count": os.cpu_count(), "cpu_affinity": affinity}


def timing(fn: Callable[[], Any], repeats: int) -> dict[str, float]:
  """Median and min wall milliseconds of `fn()` (results blocked on) after one warm-up call."""
  jax.block_until_ready(fn())
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn())
    times.append((time.perf_counter() - start) * 1e3)
  times.sort()
  return {"median_ms": times[len(times) // 2], "min_ms": times[0], "repeats": repeats}


def time_call(fn: Callable[[], Any], repeats: int) -> float:
  """Median wall seconds of `fn()` (results blocked on), after one untimed warm-up call."""
  return timing(fn, repeats)["median_ms"] / 1e3


def print_table(title: str, rows: Sequence[dict[str, Any]]) -> None:
  """Rows of dicts as an aligned text table."""
  if not rows:
    return
  keys = list(rows[0])
  cells = [[_fmt(r.get(k)) for k in keys] for r in rows]
  widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
  print(f"\n{title}")
  print("  ".join(k.ljust(w) for k, w in zip(keys, widths)))
  for c in cells:
    print("  ".join(v.ljust(w) for v, w in zip(c, widths)))


def _fmt(value: Any) -> str:
  if value is None:  # a column this row does not measure
    return "-"
  if isinstance(value, float):
    return f"{value:.4g}"
  return str(value)


def write_json(path: str | pathlib.Path, record: dict[str, Any]) -> pathlib.Path:
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps({"device": device_summary(), **record}, indent=2))
  print(f"wrote {path}")
  return path
