"""The local sweep launcher: grid expansion, commands, per-point status, bad specs."""

import json
import sys

import pytest

from launch import sweep


def test_grid_points_and_commands(tmp_path):
  grid = sweep.parse_grid(["optim.learning_rate=1e-6,1e-5", "loss.kl_coef=0,0.001"])
  pts = sweep.points(grid)
  assert len(pts) == 4 and pts[1] == {"optim.learning_rate": "1e-6", "loss.kl_coef": "0.001"}
  cmd = sweep.command("experiments.memex_grpo", "cfg.py:gpu", tmp_path, pts[1])
  assert cmd[:3] == [sys.executable, "-m", "experiments.memex_grpo"]
  assert f"--config.workdir={tmp_path / 'learning_rate=1e-6,kl_coef=0.001'}" in cmd
  assert "--config.loss.kl_coef=0.001" in cmd


def test_malformed_grid_is_refused():
  with pytest.raises(ValueError, match="KEY=V1,V2"):
    sweep.parse_grid(["learning_rate"])


def test_sweep_runs_each_point_and_records_failures(tmp_path):
  # A real process per point: json.tool rejects the --config flag, which must be recorded.
  status = sweep.main(["--module", "json.tool", "--config", "x", "--root", str(tmp_path),
                       "--grid", "a=1"])
  record = json.loads((tmp_path / "sweep.json").read_text())
  assert status == 1 and record[0]["status"] not in (0, None)
