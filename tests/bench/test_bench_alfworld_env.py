"""bench.alfworld_env runs its three modes on a small generated scene."""

import json

import pytest

from bench import alfworld_env


@pytest.mark.slow
def test_single_pool_and_loop_modes_play_real_steps(tmp_path, monkeypatch):
  games = alfworld_env.scene_games(str(tmp_path / "games"), "small", count=2)
  assert len(games) == 2
  single = alfworld_env.bench_single(games, episodes=1, steps=2)
  pooled = alfworld_env.bench_pool(games, workers=1, episodes=1, steps=2)
  loop = alfworld_env.bench_loop(games, workers=1, episodes=1, steps=2)
  for row in (single, pooled, loop):
    assert row["steps_per_s"] > 0 and row["step_ms"] > 0
  # The loop's scripted policy reads admissible commands from its context, as a model would.
  assert alfworld_env.admissible("You see a desk.\nAdmissible commands: look, go to desk 1.") == [
      "look", "go to desk 1"]
  out = tmp_path / "result.json"
  monkeypatch.setattr("sys.argv", ["alfworld_env", "--workers", "1", "--episodes", "1",
                                   "--steps", "1", "--out", str(out)])
  # Both scene sizes on the small games: ALFRED-sized resets take ~10 s each.
  monkeypatch.setattr(alfworld_env, "scene_games", lambda folder, size, count: games)
  alfworld_env.main()
  rows = json.loads(out.read_text())["rows"]
  assert [(r["scene"], r["mode"]) for r in rows] == [
      (scene, mode) for scene in ("small", "alfred") for mode in ("single", "pool", "loop")]
