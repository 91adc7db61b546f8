"""The MemexRL entry point runs one real iteration end to end (SmolLM2, ALFWorld, orbax)."""

import json

import pytest


@pytest.mark.slow
def test_one_tiny_iteration_from_a_warm_start_logs_checkpoints_and_exports(tmp_path, entry_point):
  workdir = tmp_path / "run"
  run = entry_point(
      "memex_grpo", f"--config.workdir={workdir}", "--config.num_iterations=1",
      "--config.games.num=2", "--config.rollout.prompts_per_iteration=1",
      "--config.agent.max_steps=1", "--config.agent.max_turn_tokens=8",
      "--config.agent.context_window=640", "--config.batch.seq_len=640",
      "--config.warm_start.num_steps=1", "--config.warm_start.games=2",
      "--config.warm_start.demos=1", "--config.warm_start.seq_len=640")
  assert run.returncode == 0, run.stderr[-2000:]
  # The SFT ran first, in its own process, and RL started from its export.
  sft_rows = [json.loads(line) for line in
              (workdir / "warm_start" / "metrics.jsonl").read_text().splitlines()]
  assert [r["step"] for r in sft_rows if r.get("kind") == "sft"] == [1]
  assert f"params from {workdir}/warm_start/params (step 1)" in run.stdout
  rows = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  assert len(rows) == 1 and rows[0]["step"] == 1
  assert {"success", "reward", "groups_kept", "groups_dropped", "skip_step"} <= set(rows[0])
  assert (workdir / "checkpoints" / "1").is_dir() and (workdir / "params").is_dir()


@pytest.mark.slow
def test_one_tiny_iteration_on_appworld(tmp_path, entry_point, worlds):
  root = worlds["train"][0].rsplit("/data/tasks/", 1)[0]
  workdir = tmp_path / "run"
  run = entry_point(
      "memex_grpo", f"--config.workdir={workdir}", "--config.num_iterations=1",
      "--config.env.name=appworld", f"--config.games.dir={root}", "--config.games.num=2",
      "--config.rollout.prompts_per_iteration=1", "--config.agent.max_steps=2",
      "--config.agent.max_turn_tokens=8", "--config.agent.context_window=2048",
      "--config.batch.seq_len=2048", "--config.warm_start.num_steps=0")
  assert run.returncode == 0, run.stderr[-2000:]
  [row] = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  assert row["step"] == 1 and {"success", "reward", "skip_step"} <= set(row)
  played = [json.loads(line) for line in
            (workdir / "rollouts" / "iteration_1.jsonl").read_text().splitlines()]
  assert len(played) == 2 and played[0]["task"] == played[1]["task"]  # one group of 2
  assert all(r["metrics"]["steps"] >= 1 for r in played)  # the AppWorld task was played
