"""The evaluation entry point runs end to end on a 2-device mesh (SmolLM2, generated ALFWorld),
writes trajectories as it goes and resumes a stopped evaluation."""

import json

import pytest


@pytest.mark.slow
def test_evaluates_packaged_weights_data_parallel_and_writes_table_json_and_plot(
    tmp_path, entry_point):
  workdir = tmp_path / "eval"
  # Two devices: the default mesh (fsdp over all) splits the slots, so the one episode asked
  # for at a time rounds up to two and both games decode together.
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
  assert report["sampler"]["generated_tokens"] == 2 * summary["generated_tokens"]
  counted = report["census"]["valid_seen/memex"]
  assert counted["episodes"] == 2 and sum(counted["calls"].values()) == 2  # one turn each
  assert (workdir / "evaluation.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_writes_each_game_as_it_ends_and_resumes_where_it_stopped(tmp_path, entry_point):
  workdir = tmp_path / "eval"
  flags = (f"--config.workdir={workdir}", "--config.splits=('valid_seen',)",
           "--config.regimes=('memex',)", "--config.num_games=2", "--config.batch_episodes=1",
           "--config.agent.max_steps=2", "--config.agent.max_turn_tokens=8")
  first = entry_point("evaluate", *flags)
  assert first.returncode == 0, first.stderr[-2000:]
  path = workdir / "trajectories" / "valid_seen_memex.jsonl"
  lines = path.read_text().splitlines()
  assert [json.loads(line)["index"] for line in lines] == [0, 1]
  record = json.loads(lines[0])
  assert record["segments"][0][0]["role"] == "system" and record["metrics"]["steps"] == 2
  assert "valid_seen_memex turns" in first.stderr  # the progress bar over turns
  # Stopped during the second game (one at a time): its record never reached the file.
  path.write_text(lines[0] + "\n")
  resumed = entry_point("evaluate", *flags)
  assert resumed.returncode == 0, resumed.stderr[-2000:]
  again = path.read_text().splitlines()
  assert again[0] == lines[0] and len(again) == 2  # game 0 kept, not played again
  assert json.loads(again[1])["metrics"] == json.loads(lines[1])["metrics"]  # greedy: same play
  # Another checkpoint in the same workdir is refused before anything is played.
  other = entry_point("evaluate", *flags, f"--config.checkpoint={tmp_path}/elsewhere")
  assert other.returncode != 0
  assert "holds the trajectories of another evaluation" in other.stderr.strip().splitlines()[-1]
