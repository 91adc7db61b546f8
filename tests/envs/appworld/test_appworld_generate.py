"""The generator's output: AppWorld's official layout, splits and ground truth."""

import json
import os

import pytest

from memex_jax.envs.appworld import env as appworld_env
from memex_jax.envs.appworld import generate


def test_split_designs():
  assert generate.split_types("test_challenge") == ["file_sort", "contact_payments",
                                                    "received_note"]
  assert len(generate.split_types("train")) == 5
  with pytest.raises(ValueError, match="unknown split"):
    generate.split_types("valid")
  designs = generate.design_split("train", 6, seed=1)
  assert [d.task_id for d in designs] == [f"train1_{i}" for i in range(1, 7)]
  assert designs[5].task_type == designs[0].task_type  # cycles through the types
  assert designs == generate.design_split("train", 6, seed=1)
  assert designs[0] != generate.design_split("test_normal", 5, seed=1)[0]


def test_layout_on_disk(worlds):
  root = os.path.dirname(os.path.dirname(os.path.dirname(worlds["train"][0])))
  data = os.path.join(root, "data")
  assert os.path.isfile(os.path.join(data, "api_docs", "standard", "simple_note.json"))
  assert os.path.isfile(os.path.join(data, "base_dbs", "venmo.db"))
  for split in ("train", "test_challenge"):
    assert appworld_env.dataset_tasks(root, split) == worlds[split]
  for task in worlds["train"] + worlds["test_challenge"]:
    with open(os.path.join(task, "specs.json")) as f:
      specs = json.load(f)
    assert {"instruction", "supervisor", "datetime", "db_version"} <= set(specs)
    assert os.path.isfile(os.path.join(task, "dbs", "simple_note.db"))
    meta = generate.read_json(task, "meta")
    assert meta["difficulty"] in (1, 2, 3) and meta["apps"]
