"""Generated splits: deterministic, cached, official layout and loader, expert-solvable."""

import collections
import json
import os
import random

import pytest

from memex_jax.envs.alfworld import catalog
from memex_jax.envs.alfworld import env as alfworld_env
from memex_jax.envs.alfworld import games
from memex_jax.envs.alfworld import generate
from memex_jax.envs.alfworld import layouts
from memex_jax.envs.alfworld import pddl
from memex_jax.envs.alfworld import sampling


def _file_bytes(root, records):
  out = {}
  for r in records:
    for name in (games.GAME_FILE, games.TRAJ_FILE):
      with open(os.path.join(root, r["path"], name), "rb") as f:
        out[(r["path"], name)] = f.read()
  return out


def test_schedule_matches_the_official_train_mix():
  counts = collections.Counter(generate.task_type_schedule("train", 3553, seed=0))
  assert counts == collections.Counter(catalog.TRAIN_TASK_MIX)
  small = generate.task_type_schedule("valid_seen", 12, seed=0)
  assert len(small) == 12 and set(small) == set(catalog.TASK_TYPES)
  assert small != generate.task_type_schedule("valid_seen", 12, seed=1)


def test_deterministic_per_seed(tmp_path, games_root, manifest):
  again = generate.generate_split(str(tmp_path / "a"), "valid_seen", num=12, seed=0, workers=1,
                                  progress=False)
  assert [r["path"] for r in again] == [r["path"] for r in manifest]
  assert _file_bytes(str(tmp_path / "a"), again) == _file_bytes(games_root, manifest)
  other = generate.generate_split(str(tmp_path / "b"), "valid_seen", num=12, seed=1, workers=1,
                                  progress=False)
  assert _file_bytes(str(tmp_path / "b"), other) != _file_bytes(games_root, manifest)


def test_official_layout_histograms_and_cache(games_root, manifest):
  assert [r["index"] for r in manifest] == list(range(12))
  assert {r["task_type"] for r in manifest} == set(catalog.TASK_TYPES)
  seen_plans = set(layouts.floor_plan_numbers("valid_seen"))
  for r in manifest:
    split, kind, trial = r["path"].split(os.sep)
    assert split == "valid_seen" and trial.startswith("trial_0_")
    assert kind.startswith(r["task_type"] + "-") and kind.endswith(f"-{r['floor_plan']}")
    assert r["floor_plan"] in seen_plans
    with open(os.path.join(games_root, r["path"], games.TRAJ_FILE)) as f:
      traj = json.load(f)
    assert traj["task_type"] == r["task_type"]
    assert traj["scene"]["floor_plan"] == f"FloorPlan{r['floor_plan']}"
  with open(os.path.join(games_root, "valid_seen", generate.HISTOGRAMS)) as f:
    hists = json.load(f)
  assert hists == json.loads(json.dumps(generate.histograms(manifest)))
  for name in ("task_type", "room", "num_receptacles", "plan_length"):
    assert sum(hists[name].values()) == 12
  # Cached: a second call reads the manifest and rewrites nothing.
  game = os.path.join(games_root, manifest[0]["path"], games.GAME_FILE)
  before = os.stat(game).st_mtime_ns
  assert generate.generate_split(games_root, "valid_seen", 12, 0, workers=1,
                                 progress=False) == manifest
  assert os.stat(game).st_mtime_ns == before
  with pytest.raises(FileExistsError, match="another generation"):
    generate.generate_split(games_root, "valid_seen", 13, 0, workers=1, progress=False)


def test_unseen_split_never_uses_train_plans(tmp_path, capsys):
  generate.main(["--out", str(tmp_path), "--split", "valid_unseen", "--num", "6", "--seed", "3",
                 "--workers", "2"])
  printed = capsys.readouterr().out
  assert "== valid_unseen: 6 games" in printed and "plan_length:" in printed
  with open(tmp_path / "valid_unseen" / generate.MANIFEST) as f:
    records = json.load(f)["games"]
  plans = {r["floor_plan"] for r in records}
  assert plans <= set(layouts.UNSEEN_FLOOR_PLANS)
  assert not plans & set(layouts.floor_plan_numbers("train"))


def test_official_loader_reads_generated_games(games_root, manifest):
  from alfworld.agents.environment import alfred_tw_env  # pylint: disable=g-import-not-at-top
  config = {
      "env": {"goal_desc_human_anns_prob": 0, "task_types": [1, 2, 3, 4, 5, 6]},
      "dataset": {"eval_id_data_path": os.path.join(games_root, "valid_seen"),
                  "num_eval_games": -1},
  }
  loader = alfred_tw_env.AlfredTWEnv(config, train_eval="eval_in_distribution")
  expected = {os.path.join(games_root, r["path"], games.GAME_FILE) for r in manifest}
  assert set(loader.game_files) == expected


@pytest.mark.slow
@pytest.mark.parametrize("task_type", catalog.TASK_TYPES)
def test_engine_planner_expert_solves_every_task_type(task_type, tmp_path):
  """Fast-downward's plan, computed by ALFWorld's PLANNER expert, wins each task type."""
  # The smallest train floor plan that hosts the task keeps the planner quick.
  plans = sorted((layouts.load_floor_plan(n) for n in layouts.floor_plan_numbers("train")),
                 key=lambda p: (len(p.receptacles), p.number))
  spec = next(filter(None, (sampling.sample_game(p, task_type, random.Random(0)) for p in plans)))
  pddl.write_game(spec, str(tmp_path), name=task_type)
  expert = alfworld_env.AlfWorldEnv(alfworld_env.AlfWorldConfig(expert="planner"))
  task_text, _ = expert.reset(str(tmp_path))
  commands = expert.expert_plan
  assert commands and task_text == spec.task_text
  player = alfworld_env.AlfWorldEnv(alfworld_env.memex_harder())
  player.reset(str(tmp_path))
  won = False
  for command in commands:
    _, done, won, _ = player.step(command)
  assert won and done
  assert len(commands) <= len(spec.walkthrough)
