"""The evaluation entry point runs end to end on a 2-device mesh (SmolLM2, generated ALFWorld)."""

import json

import pytest


@pytest.mark.slow
def test_evaluates_packaged_weights_data_parallel_and_writes_table_json_and_plot(
    tmp_path, entry_point):
  workdir = tmp_path / "eval"
  # Two devices: the default mesh (fsdp over all) splits the slots, so the one episode a chunk
  # asks for rounds up to two and both games decode together.
  run = entry_point(
      "evaluate", f"--config.workdir={workdir}", "--config.splits=('valid_seen',)",
      "--config.regimes=('memex',)", "--config.num_games=2", "--config.batch_episodes=1",
      "--config.agent.max_steps=1", "--config.agent.max_turn_tokens=8", devices=2)
  assert run.returncode == 0, run.stderr[-2000:]
  assert "decoding 2 episodes at a time on a {'data': 1, 'fsdp': 2, 'tensor': 1} mesh" in run.stdout
  assert "valid_seen/memex" in run.stdout  # the printed table
  report = json.loads((workdir / "evaluation.json").read_text())
  summary = report["results"]["valid_seen/memex"]
  assert summary["episodes"] == 2 and 0.0 <= summary["success"] <= 1.0
  # max_steps=1: each episode takes its one turn (the prompt fits the default window) and ends.
  assert summary["steps"] == 1.0 and summary["finish_max_steps"] == 1.0
  assert 0 < summary["generated_tokens"] <= 8 and summary["peak_working"] > 0
  assert (workdir / "evaluation.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
