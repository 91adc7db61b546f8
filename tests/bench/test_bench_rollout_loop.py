"""bench.rollout_loop at tiny size: real agent loop, SmolLM2 and harder-ALFWorld engines."""

import json

import pytest

from bench import rollout_loop


@pytest.mark.slow
def test_two_episodes_report_throughput_and_a_time_split_that_sums_to_the_wall(games_root,
                                                                               tmp_path):
  out = tmp_path / "rollout_loop.json"
  rollout_loop.main(["--live", "2", "--steps", "2", "--group_size", "1", "--games_dir",
                     games_root, "--split", "valid_seen", "--chunk_tokens", "16", "--no_warmup",
                     "--out", str(out)])
  record = json.loads(out.read_text())
  assert record["command"].startswith("python -m bench.rollout_loop --live 2")
  rows = record["rows"]
  assert [(r["live"], r["share_prefix"], r["chunk_tokens"]) for r in rows] == [
      (2, False, 0), (2, True, 0), (2, True, 16)]
  for row in rows:
    assert row["episodes"] == 2 and row["errors"] == 0 and 2 <= row["steps"] <= 4
    assert row["episodes_per_min"] > 0 and row["generated_tokens_per_s"] > 0
    assert row["generated_tokens"] > 0 and row["sampler_calls"] >= 2
    for part in ("prefill_s", "decode_s", "env_s"):
      assert row[part] > 0, part
    assert row["host_s"] >= 0  # the seam timers do not overlap
    parts = row["prefill_s"] + row["decode_s"] + row["env_s"] + row["host_s"]
    assert parts == pytest.approx(row["wall_s"], rel=0.02)
  off, on, chunked = rows
  # The two games share the system prompt: prefilled once with the cache on, in each row without.
  assert off["prefix_tokens"] == 0 and on["prefix_tokens"] > 500
  assert off["prefill_tokens"] - on["prefill_tokens"] >= on["prefix_tokens"]
  assert on["prefix_speedup"] > 0
  # 48-id turns in chunks of 16: a turn that runs to its cap takes three calls.
  assert chunked["sampler_calls"] >= on["sampler_calls"] and chunked["chunk_speedup"] > 0
