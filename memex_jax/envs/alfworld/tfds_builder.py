"""ALFWorld games as a tfds dataset (array_record, readable without TensorFlow).

  builder = AlfworldGames(games_root=OUT, data_dir=TFDS_DIR)  # OUT from generate.py
  builder.download_and_prepare()
  source = builder.as_data_source(split="train")             # random access, no TensorFlow
  folder = materialize(source[0], "/tmp/game0")                # a playable game folder

Each record holds the PDDL problem and the goal sentence; `materialize` rebuilds the two game
files with the domain and grammar shipped in the alfworld wheel.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterator

import numpy as np
import tensorflow_datasets as tfds

from memex_jax.envs.alfworld import games
from memex_jax.envs.alfworld import layouts
from memex_jax.envs.alfworld import pddl


class AlfworldGames(tfds.core.GeneratorBasedBuilder):
  """ALFWorld games found under `games_root` (generated, or official via ALFWORLD_DATA)."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Games of generate.py or the official release."}

  def __init__(self, *, games_root: str | None = None, **kwargs: Any):
    self._games_root = games_root
    kwargs.setdefault("file_format", "array_record")
    super().__init__(**kwargs)

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(
        description=__doc__.split("\n")[0],
        features=tfds.features.FeaturesDict({
            "game_id": tfds.features.Text(),
            "task_type": tfds.features.Text(),
            "task_text": tfds.features.Text(),
            "floor_plan": np.int32,
            "pddl_problem": tfds.features.Text(),
            "walkthrough": tfds.features.Sequence(tfds.features.Text()),
            "traj_data": tfds.features.Text(),
        }),
        supervised_keys=None,
    )

  def _split_generators(self, dl_manager) -> dict[str, Iterator]:
    del dl_manager  # Everything is local.
    splits = {}
    for split in layouts.SPLITS:
      try:
        base = os.path.dirname(games.split_root(self._games_root, split))
      except FileNotFoundError:
        continue
      splits[split] = self._generate_examples(games.find_games(self._games_root, split), base)
    if not splits:
      raise FileNotFoundError(f"no ALFWorld split under {self._games_root or 'ALFWORLD_DATA'}")
    return splits

  def _generate_examples(self, folders: list[str],
                         base: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for folder in folders:
      with open(os.path.join(folder, games.GAME_FILE)) as f:
        game = json.load(f)
      with open(os.path.join(folder, games.TRAJ_FILE)) as f:
        traj = json.load(f)
      game_id = os.path.relpath(folder, base)
      yield game_id, {
          "game_id": game_id,
          "task_type": traj["task_type"],
          "task_text": _goal_sentence(game["grammar"]),
          "floor_plan": int(traj.get("scene", {}).get("scene_num", -1)),
          "pddl_problem": game["pddl_problem"],
          "walkthrough": list(game.get("walkthrough") or []),
          "traj_data": json.dumps(traj),
      }


def _goal_sentence(grammar: str) -> str:
  marker = '"rhs": "Your task is to: '
  start = grammar.index(marker) + len(marker)
  return grammar[start:grammar.index('."', start)]


def _text(value: Any) -> str:
  return value.decode() if isinstance(value, bytes) else str(value)


def materialize(record: dict[str, Any], folder: str) -> str:
  """Writes a record back as game.tw-pddl + traj_data.json in `folder`; returns the folder."""
  game = pddl.game_record(_text(record["pddl_problem"]), _text(record["task_text"]),
                          [_text(c) for c in record["walkthrough"]])
  pddl.write_records(folder, game, json.loads(_text(record["traj_data"])))
  return folder
