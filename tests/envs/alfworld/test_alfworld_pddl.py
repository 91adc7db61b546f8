"""Game files: ALFRED's name mangling, the goal library, the engine's own display names."""

import json
import os
import random

from alfworld.gen import goal_library

from memex_jax.envs.alfworld import games
from memex_jax.envs.alfworld import layouts
from memex_jax.envs.alfworld import pddl
from memex_jax.envs.alfworld import sampling


def _spec():
  plan = layouts.load_floor_plan(14)
  return sampling.sample_game(plan, "pick_clean_then_place_in_recep", random.Random(5))


def test_mangle_follows_alfred():
  assert pddl.mangle("Sink|-01.90|+00.97|-01.50|SinkBasin") == (
      "Sink_bar__minus_01_dot_90_bar__plus_00_dot_97_bar__minus_01_dot_50_bar_SinkBasin")
  assert pddl.location_name((-4, 7, 2, 45)) == "loc_bar__minus_4_bar_7_bar_2_bar_45"


def test_problem_declares_and_places_everything():
  spec = _spec()
  text = pddl.problem_text(spec, "p")
  for obj in spec.objects:
    name = pddl.mangle(obj.object_id)
    assert f"{name} - object" in text
    assert f"(inReceptacle {name} {pddl.mangle(obj.receptacle_id)})" in text
  for rec in spec.floor_plan.receptacles:
    assert f"(receptacleAtLocation {pddl.mangle(rec.object_id)} " in text
  goal = goal_library.gdict[spec.task.task_type]["pddl"].format(
      obj=spec.task.object_target, recep=spec.task.parent_target, toggle="", mrecep="")
  assert text.endswith(goal.replace("#", "-"))
  assert text.count("(atLocation agent1 ") == 1


def test_display_names_number_instances():
  spec = _spec()
  names = pddl.display_names(spec)
  sinks = [n for i, n in names.items() if i.endswith("SinkBasin")]
  assert sinks and all(n.startswith("sinkbasin ") for n in sinks)
  per_kind = {}
  for alfred_id, name in names.items():
    kind, number = name.rsplit(" ", 1)
    per_kind.setdefault(kind, []).append(int(number))
  assert all(sorted(v) == list(range(1, len(v) + 1)) for v in per_kind.values())
  commands = pddl.walkthrough_commands(spec)
  assert commands[-1].startswith("move ") and any(c.startswith("clean ") for c in commands)


def test_written_files(tmp_path):
  spec = _spec()
  pddl.write_game(spec, str(tmp_path), name="g")
  with open(os.path.join(tmp_path, games.GAME_FILE)) as f:
    game = json.load(f)
  with open(os.path.join(tmp_path, games.TRAJ_FILE)) as f:
    traj = json.load(f)
  assert game["solvable"] is True and "UNKNOWN GOAL" not in game["grammar"]
  assert f"Your task is to: {spec.task_text}." in game["grammar"]
  assert game["walkthrough"] == pddl.walkthrough_commands(spec)
  assert traj["pddl_params"]["object_target"] == spec.task.object_target
  assert traj["scene"]["scene_num"] == 14
  assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
