"""Finds ALFWorld games on disk: ours (generate.py) or the official ones under ALFWORLD_DATA."""

from __future__ import annotations

import json
import os

GAME_FILE = "game.tw-pddl"
TRAJ_FILE = "traj_data.json"
# Folder names of the official release under $ALFWORLD_DATA.
_OFFICIAL_SUBDIR = "json_2.1.1"


def split_root(root: str | None, split: str) -> str:
  """The folder holding `split`'s games: root/split, or root/json_2.1.1/split (official).

  `root` defaults to $ALFWORLD_DATA.
  """
  root = root or os.environ.get("ALFWORLD_DATA")
  if not root:
    raise ValueError("no game root given and ALFWORLD_DATA is not set")
  for candidate in (os.path.join(root, split), os.path.join(root, _OFFICIAL_SUBDIR, split)):
    if os.path.isdir(candidate):
      return candidate
  raise FileNotFoundError(f"no folder for split {split!r} under {root} "
                          f"(looked for {split}/ and {_OFFICIAL_SUBDIR}/{split}/)")


def find_games(root: str | None, split: str) -> list[str]:
  """Sorted game folders of a split that ALFWorld's own loader would play.

  Like `AlfredTWEnv.collect_game_files`: a folder needs both files, `solvable: true`, and is
  skipped when its path names a movable-receptacle or sliced task.
  """
  base = split_root(root, split)
  folders = []
  for folder, _, files in os.walk(base):
    if GAME_FILE not in files or TRAJ_FILE not in files:
      continue
    if "movable" in folder or "Sliced" in folder:
      continue
    with open(os.path.join(folder, GAME_FILE)) as f:
      if not json.load(f).get("solvable", False):
        continue
    folders.append(folder)
  return sorted(folders)


def game_file(game: str) -> str:
  """Accepts a game folder or its game.tw-pddl path; returns the game.tw-pddl path."""
  path = os.path.join(game, GAME_FILE) if os.path.isdir(game) else game
  if not os.path.isfile(path):
    raise FileNotFoundError(f"no ALFWorld game at {game} (expected a folder with {GAME_FILE})")
  return path
