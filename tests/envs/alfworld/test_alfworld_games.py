"""Game discovery for our splits and for the official ALFWORLD_DATA layout."""

import json
import os
import shutil

import pytest

from memex_jax.envs.alfworld import games


def test_finds_generated_games(games_root, manifest):
  found = games.find_games(games_root, "valid_seen")
  assert found == sorted(os.path.join(games_root, r["path"]) for r in manifest)
  assert games.game_file(found[0]) == os.path.join(found[0], games.GAME_FILE)


def test_official_layout_from_alfworld_data(tmp_path, monkeypatch, games_root, manifest):
  official = tmp_path / "json_2.1.1" / "train"
  for i, record in enumerate(manifest[:3]):
    shutil.copytree(os.path.join(games_root, record["path"]), official / f"task{i}" / "trial")
  # ALFWorld's loader skips unsolvable games and movable/sliced tasks; so do we.
  unsolvable = official / "task0" / "trial" / games.GAME_FILE
  unsolvable.write_text(json.dumps({**json.loads(unsolvable.read_text()), "solvable": False}))
  shutil.copytree(official / "task1", official / "pick_and_place_with_movable_recep-x")
  monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
  found = games.find_games(None, "train")
  assert found == [str(official / "task1" / "trial"), str(official / "task2" / "trial")]


def test_missing_things_are_clear_errors(tmp_path, monkeypatch):
  monkeypatch.delenv("ALFWORLD_DATA", raising=False)
  with pytest.raises(ValueError, match="ALFWORLD_DATA"):
    games.find_games(None, "train")
  with pytest.raises(FileNotFoundError, match="valid_seen"):
    games.find_games(str(tmp_path), "valid_seen")
  with pytest.raises(FileNotFoundError, match="no ALFWorld game"):
    games.game_file(str(tmp_path))
