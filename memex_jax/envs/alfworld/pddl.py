"""Writes a sampled game in ALFWorld's official file format (`game.tw-pddl`, `traj_data.json`).

The PDDL problem follows what ALFRED's generator emits: ids mangled with `_bar_`, `_plus_`, ...,
every object and receptacle class declared as a type, the goal from the shipped goal library.
Display names ('apple 2') come from ALFWorld's own Demangler, so walkthrough commands match
what the engine accepts.
"""

from __future__ import annotations

import json
import os
import types
from typing import Any

from alfworld import info as alfworld_info
from alfworld.agents.utils.misc import Demangler
from alfworld.gen import constants as alfred_constants
from alfworld.gen import goal_library

from memex_jax.envs.alfworld import catalog
from memex_jax.envs.alfworld import games
from memex_jax.envs.alfworld import layouts
from memex_jax.envs.alfworld import sampling


# ALFRED's character escapes for PDDL names, applied in this order ('-' first: the others
# introduce no '-').
_ESCAPES = (("-", "_minus_"), ("|", "_bar_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_"))

_OBJECT_TYPES = sorted(alfred_constants.OBJECTS_SET - catalog.STATIC_RECEPTACLES)
_RECEPTACLE_TYPES = sorted(catalog.STATIC_RECEPTACLES)


def mangle(name: str) -> str:
  """ALFRED id or location -> PDDL name ('Apple|+01.00|...' -> 'Apple_bar__plus_01_dot_00...')."""
  for char, escape in _ESCAPES:
    name = name.replace(char, escape)
  return name


def location_name(location: layouts.Location) -> str:
  return mangle("loc|%d|%d|%d|%d" % location)


def _facts(spec: sampling.GameSpec) -> list[str]:
  plan = spec.floor_plan
  rec_by_id = {r.object_id: r for r in plan.receptacles}
  present = sorted({p.kind for p in spec.objects})
  facts = [f"(atLocation agent1 {location_name(spec.agent_location)})"]
  for rec in plan.receptacles:
    name = mangle(rec.object_id)
    facts.append(f"(receptacleType {name} {rec.kind}Type)")
    facts.append(f"(receptacleAtLocation {name} {location_name(rec.location)})")
    if rec.kind in catalog.OPENABLE:
      facts.append(f"(openable {name})")
  for rkind in sorted(plan.receptacle_kinds):
    facts += [f"(canContain {rkind}Type {okind}Type)" for okind in present
              if catalog.can_contain(rkind, okind)]
  for obj in spec.objects:
    name = mangle(obj.object_id)
    host = rec_by_id[obj.receptacle_id]
    facts.append(f"(objectType {name} {obj.kind}Type)")
    facts.append(f"(inReceptacle {name} {mangle(host.object_id)})")
    facts.append(f"(objectAtLocation {name} {location_name(host.location)})")
    if obj.kind not in catalog.LAMPS:
      facts.append(f"(pickupable {name})")
    facts += [f"({pred} {name})" for pred in catalog.property_predicates(obj.kind)]
  return facts


def problem_text(spec: sampling.GameSpec, name: str) -> str:
  """The PDDL problem of a game (objects, initial facts, goal)."""
  plan = spec.floor_plan
  locations = sorted({r.location for r in plan.receptacles} | {spec.agent_location})
  lines = [f"(define (problem plan_{name})", "(:domain alfred)", "(:objects", "agent1 - agent"]
  lines += [f"{kind}Type - otype" for kind in _OBJECT_TYPES]
  lines += [f"{kind}Type - rtype" for kind in _RECEPTACLE_TYPES]
  lines += [f"{mangle(o.object_id)} - object" for o in spec.objects]
  lines += [f"{mangle(r.object_id)} - receptacle" for r in plan.receptacles]
  lines += [f"{location_name(loc)} - location" for loc in locations]
  lines += [")", "(:init"] + _facts(spec) + [")"]
  task = spec.task
  goal = goal_library.gdict[task.task_type]["pddl"].format(
      obj=task.object_target, recep=task.parent_target, toggle=task.toggle_target, mrecep="")
  return "\n".join(lines) + "\n" + goal.replace("#", "-")


def display_names(spec: sampling.GameSpec) -> dict[str, str]:
  """ALFRED id -> the name the engine shows ('apple 2'), numbered by ALFWorld's Demangler."""
  ids = [o.object_id for o in spec.objects] + [r.object_id for r in spec.floor_plan.receptacles]
  # The engine sees lower-cased PDDL names; the Demangler numbers instances in that order.
  pddl_ids = {mangle(i).lower(): i for i in ids}
  infos = {pid: types.SimpleNamespace(id=pid) for pid in pddl_ids}
  demangler = Demangler(game_infos=infos)
  return {alfred_id: demangler.demangle_alfred_name(pid).strip().lower()
          for pid, alfred_id in pddl_ids.items()}


def walkthrough_commands(spec: sampling.GameSpec) -> list[str]:
  """The spec's walkthrough as engine commands ('take apple 2 from countertop 1', ...)."""
  names = display_names(spec)
  templates = {
      "go": "go to {0}", "open": "open {0}", "take": "take {0} from {1}",
      "move": "move {0} to {1}", "use": "use {0}", "clean": "clean {0} with {1}",
      "heat": "heat {0} with {1}", "cool": "cool {0} with {1}",
  }
  return [templates[verb].format(*(names[i] for i in ids)) for verb, *ids in spec.walkthrough]


def game_record(pddl_problem: str, task_text: str, walkthrough: list[str]) -> dict[str, Any]:
  """`game.tw-pddl` contents: the shipped domain and grammar (goal filled in), the problem."""
  with open(alfworld_info.ALFRED_PDDL_PATH) as f:
    domain = f.read()
  with open(alfworld_info.ALFRED_TWL2_PATH) as f:
    grammar = f.read().replace("UNKNOWN GOAL", task_text)
  return {
      "pddl_domain": domain,
      "grammar": grammar,
      "pddl_problem": pddl_problem,
      "solvable": True,  # AlfredTWEnv only collects games that carry this key as True.
      "walkthrough": walkthrough,
  }


def game_records(spec: sampling.GameSpec, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
  """Returns (`game.tw-pddl` contents, `traj_data.json` contents) of a game."""
  game = game_record(problem_text(spec, name), spec.task_text, walkthrough_commands(spec))
  task = spec.task
  traj = {
      "task_id": name,
      "task_type": task.task_type,
      "scene": {"floor_plan": f"FloorPlan{spec.floor_plan.number}",
                "scene_num": spec.floor_plan.number},
      "pddl_params": {"object_target": task.object_target, "parent_target": task.parent_target,
                      "toggle_target": task.toggle_target, "mrecep_target": "",
                      "object_sliced": False},
      "turk_annotations": {"anns": [{"task_desc": spec.task_text}]},
      "num_receptacles": len(spec.floor_plan.receptacles),
      "num_objects": len(spec.objects),
  }
  return game, traj


def write_records(folder: str, game: dict[str, Any], traj: dict[str, Any]) -> None:
  """Writes the two game files into `folder` (created if needed), each atomically."""
  os.makedirs(folder, exist_ok=True)
  for file_name, record in ((games.GAME_FILE, game), (games.TRAJ_FILE, traj)):
    tmp = os.path.join(folder, file_name + ".tmp")
    with open(tmp, "w") as f:
      json.dump(record, f)
    os.replace(tmp, os.path.join(folder, file_name))


def write_game(spec: sampling.GameSpec, folder: str, name: str) -> None:
  """Writes a sampled game's two files into `folder`."""
  write_records(folder, *game_records(spec, name))
