r"""Runs an entry point over a grid of config overrides, one workdir per point (local executor).

  python -m launch.sweep --module experiments.memex_grpo \
      --config experiments/configs/memex_grpo.py:gpu --root /tmp/sweeps/lr \
      --grid optim.learning_rate=1e-6,5e-6,1e-5 --grid loss.kl_coef=0,0.001 [--dry_run]

Each point runs as `python -m MODULE --config CONFIG --config.workdir=ROOT/NAME --config.k=v ...`
in its own process, sequentially; a failing point is reported and the sweep goes on.
`ROOT/sweep.json` records every point's command and exit status.
"""

from __future__ import annotations

import argparse
import itertools
import json
import pathlib
import subprocess
import sys
from typing import Sequence


def parse_grid(specs: Sequence[str]) -> list[tuple[str, list[str]]]:
  """['a.b=1,2', 'c=x'] -> [('a.b', ['1', '2']), ('c', ['x'])]; malformed specs raise."""
  grid = []
  for spec in specs:
    key, sep, values = spec.partition("=")
    if not sep or not key or not values:
      raise ValueError(f"--grid {spec!r}: expected KEY=V1,V2,...")
    grid.append((key, values.split(",")))
  return grid


def points(grid: list[tuple[str, list[str]]]) -> list[dict[str, str]]:
  """The cartesian product of the grid, in a fixed order."""
  keys = [k for k, _ in grid]
  return [dict(zip(keys, combo)) for combo in itertools.product(*(v for _, v in grid))]


def point_name(point: dict[str, str]) -> str:
  return ",".join(f"{k.split('.')[-1]}={v}" for k, v in point.items()) or "default"


def command(module: str, config: str, root: pathlib.Path, point: dict[str, str]) -> list[str]:
  return ([sys.executable, "-m", module, "--config", config,
           f"--config.workdir={root / point_name(point)}"] +
          [f"--config.{k}={v}" for k, v in point.items()])


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--module", required=True, help="entry point, e.g. experiments.memex_grpo")
  parser.add_argument("--config", required=True, help="config file[:variant]")
  parser.add_argument("--root", required=True, help="parent of the points' workdirs")
  parser.add_argument("--grid", action="append", default=[], help="KEY=V1,V2 (repeatable)")
  parser.add_argument("--dry_run", action="store_true", help="print the commands only")
  args = parser.parse_args(argv)
  try:
    grid = parse_grid(args.grid)
  except ValueError as e:
    parser.error(str(e))
  root = pathlib.Path(args.root)
  records = []
  for point in points(grid):
    cmd = command(args.module, args.config, root, point)
    print(" ".join(cmd))
    status = None if args.dry_run else subprocess.run(cmd, check=False).returncode
    if status:
      print(f"point {point_name(point)} failed with exit status {status}", file=sys.stderr)
    records.append({"point": point, "command": cmd, "status": status})
  if not args.dry_run:
    root.mkdir(parents=True, exist_ok=True)
    (root / "sweep.json").write_text(json.dumps(records, indent=1))
  return int(any(r["status"] for r in records))


if __name__ == "__main__":
  sys.exit(main())
