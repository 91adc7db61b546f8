"""Floor plans come from the shipped layout files; splits keep unseen plans out of train."""

import json
import os

import pytest

from memex_jax.envs.alfworld import catalog
from memex_jax.envs.alfworld import layouts


def test_splits_follow_alfred():
  train = set(layouts.floor_plan_numbers("train"))
  assert set(layouts.floor_plan_numbers("valid_seen")) == train
  unseen = set(layouts.floor_plan_numbers("valid_unseen"))
  assert unseen and not unseen & train
  assert {catalog.room_of(n) for n in unseen} == {"Kitchen", "LivingRoom", "Bedroom", "Bathroom"}
  assert len(train) == 92
  with pytest.raises(ValueError, match="unknown split"):
    layouts.floor_plan_numbers("test")


def test_receptacles_are_the_shipped_ones():
  plan = layouts.load_floor_plan(9)
  with open(os.path.join(layouts.LAYOUT_DIR, "FloorPlan9-openable.json")) as f:
    poses = json.load(f)
  shipped = {k for k in poses if k.split("|")[0] in catalog.STATIC_RECEPTACLES or "Basin" in k}
  ids = {r.object_id for r in plan.receptacles}
  assert shipped <= ids
  for rec in plan.receptacles:
    assert rec.kind in catalog.STATIC_RECEPTACLES
    if rec.object_id in poses:
      x, z, rotation, horizon = poses[rec.object_id]
      assert rec.location == (round(x / 0.25), round(z / 0.25), rotation // 90, horizon)
    else:  # listed in objects.json without a pose: placed on a reachable floor point
      assert rec.location[:2] in plan.floor_points
  assert "SinkBasin" in plan.receptacle_kinds and "Apple" in plan.object_kinds
  assert plan.room == "Kitchen"


def test_every_shipped_plan_loads():
  numbers = layouts.floor_plan_numbers("train") + layouts.floor_plan_numbers("valid_unseen")
  sizes = [len(layouts.load_floor_plan(n).receptacles) for n in numbers]
  assert min(sizes) >= 3 and max(sizes) >= 40


def test_missing_plan_is_a_clear_error():
  with pytest.raises(FileNotFoundError, match="FloorPlan999"):
    layouts.load_floor_plan(999)
