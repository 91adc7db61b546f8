"""The tfds builder stores generated games as array_record and plays them back without TF."""

import os
import sys

from memex_jax.envs.alfworld import env as alfworld_env
from memex_jax.envs.alfworld import tfds_builder


def test_build_read_and_play(tmp_path, games_root, manifest):
  builder = tfds_builder.AlfworldGames(games_root=games_root, data_dir=str(tmp_path / "tfds"))
  builder.download_and_prepare()
  assert any(f.endswith(".array_record-00000-of-00001") or "array_record" in f
             for f in os.listdir(builder.data_dir))
  source = builder.as_data_source(split="valid_seen")
  assert len(source) == len(manifest)
  records = {r["path"]: r for r in manifest}
  small = min(manifest, key=lambda r: r["num_receptacles"])
  index = next(i for i in range(len(source))
               if source[i]["game_id"].decode() == small["path"])
  record = source[index]
  assert record["task_type"].decode() == small["task_type"]
  assert record["task_text"].decode() == small["task_text"]
  assert int(record["floor_plan"]) == records[small["path"]]["floor_plan"]
  folder = tfds_builder.materialize(record, str(tmp_path / "game"))
  env = alfworld_env.AlfWorldEnv()
  task_text, _ = env.reset(folder)
  assert task_text == small["task_text"]
  won = False
  for command in record["walkthrough"]:
    _, _, won, _ = env.step(command.decode())
  assert won
  assert "tensorflow" not in sys.modules
