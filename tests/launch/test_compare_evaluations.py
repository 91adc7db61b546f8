"""Evaluations compared side by side, from trajectories the real agent loop wrote (VaultEnv)."""

import json
import shutil

from PIL import Image
import pytest

from launch import compare_evaluations
from memex_jax.agent import AgentConfig, ChatRenderer, EpisodeSpec, ScriptedPolicy, records
from memex_jax.agent import run_episodes
from memex_jax.envs.toy import VaultEnv, VaultTask


def _call(name, **arguments):
  return f"Next.\n<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


LOOPING = "Next: " + "go to the fridge, cool the pan with the fridge, " * 4
STEADY = [_call("execute", command="read note"), _call("Finish", answer="done")]
# The same two calls after a turn that loops: a format penalty in every episode.
SLIPPING = [LOOPING] + STEADY


@pytest.fixture(scope="module")
def renderer(smollm2_tokenizer):
  return ChatRenderer(smollm2_tokenizer)


def write_evaluation(folder, renderer, script, seeds=(1, 2, 3)):
  """An evaluation workdir as experiments.evaluate leaves it: one record per game."""
  trajectories = run_episodes(
      ScriptedPolicy(renderer, [script] * len(seeds)),
      [EpisodeSpec(VaultEnv(), VaultTask(seed=s, corridor_length=3)) for s in seeds], renderer,
      AgentConfig(threshold=4000, max_turn_tokens=256, max_steps=10))
  records.write_records(folder / "trajectories" / "valid_unseen_memex.jsonl",
                        [records.trajectory_record(t, game=f"vault/{s}")
                         for s, t in zip(seeds, trajectories)])
  return trajectories


def test_the_table_pairs_each_policy_with_the_first_over_the_same_games(renderer, tmp_path,
                                                                        capsys):
  steady = write_evaluation(tmp_path / "steady", renderer, STEADY)
  slipping = write_evaluation(tmp_path / "slipping", renderer, SLIPPING, seeds=(2, 3, 4))
  out = tmp_path / "report" / "compare"
  compare_evaluations.main(["--out", str(out), f"steady={tmp_path / 'steady'}",
                            f"slipping={tmp_path / 'slipping'}"])
  saved = json.loads(out.with_suffix(".json").read_text())
  assert saved["command"].startswith("python -m launch.compare_evaluations --out")
  found = saved["compared"]["valid_unseen/memex"]
  assert list(found["policies"]) == ["steady", "slipping"]
  assert found["policies"]["slipping"]["census"]["looping"] == 3
  assert found["policies"]["steady"]["census"]["looping"] == 0
  # Games 2 and 3 were played by both; the difference is the slipping policy's format penalty.
  pair = found["paired"]["slipping"]
  by_seed = dict(zip((2, 3, 4), slipping))
  expected = [by_seed[s].metrics.reward - steady[s - 1].metrics.reward for s in (2, 3)]
  assert pair["games"] == 2 and pair["reward"] == pytest.approx(sum(expected) / 2)
  assert pair["reward"] < 0 and pair["success"] == 0.0
  table = out.with_suffix(".md").read_text()
  assert "| slipping | 3 |" in table and "minus steady" in table
  assert table.count("| 0 | finish 3 |") == 2  # none won; each episode ended by its Finish call
  assert "| slipping | 2 | " + f"{pair['reward']:+.3f}" in table
  # Each policy read the note once per game; each game's note names its own code, so one of
  # the three replies is the commonest (the first of the ties).
  assert "| policy | read |\n|---|---:|\n| steady | 3 / 1 |\n| slipping | 3 / 1 |" in table
  assert capsys.readouterr().out == table + "\n"  # printed as written
  with Image.open(out.with_suffix(".png")) as image:
    assert image.size[0] > image.size[1] > 300


def test_a_policy_of_a_saved_comparison_is_the_base_of_a_new_one(renderer, tmp_path):
  write_evaluation(tmp_path / "steady", renderer, STEADY)
  write_evaluation(tmp_path / "slipping", renderer, SLIPPING, seeds=(2, 3, 4))
  first = tmp_path / "first"
  compare_evaluations.main(["--out", str(first), f"steady={tmp_path / 'steady'}",
                            f"slipping={tmp_path / 'slipping'}"])
  # The steady workdir is gone; its row and per-game metrics come from the saved comparison.
  shutil.rmtree(tmp_path / "steady")
  again = tmp_path / "again"
  compare_evaluations.main(["--out", str(again), f"steady={first.with_suffix('.json')}",
                            f"slipping={tmp_path / 'slipping'}"])
  before = json.loads(first.with_suffix(".json").read_text())["compared"]
  after = json.loads(again.with_suffix(".json").read_text())["compared"]
  assert after == before
  assert again.with_suffix(".md").read_text().split("\n")[4:] == (
      first.with_suffix(".md").read_text().split("\n")[4:])  # all but the command line
  with pytest.raises(SystemExit, match=r"no policy 'calm'; it holds \['slipping', 'steady'\]"):
    compare_evaluations.main(["--out", str(tmp_path / "x"), f"calm={first.with_suffix('.json')}"])


def test_a_folder_without_episodes_or_a_bad_argument_is_a_clear_error(tmp_path):
  (tmp_path / "empty" / "trajectories").mkdir(parents=True)
  with pytest.raises(SystemExit, match="no trajectories"):
    compare_evaluations.main(["--out", str(tmp_path / "x"), f"a={tmp_path / 'empty'}"])
  with pytest.raises(SystemExit):  # argparse: LABEL=FOLDER is required
    compare_evaluations.main(["--out", str(tmp_path / "x"), str(tmp_path / "empty")])
