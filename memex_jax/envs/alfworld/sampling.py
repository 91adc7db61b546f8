"""Samples one ALFWorld game on a shipped floor plan, together with a plan that solves it.

A game is a task (type + target classes), object placements that respect the receptacle table,
and an agent start pose. The task targets are chosen first and placements are constrained so
that the task is solvable and not already solved at the start; the constructive walkthrough is
the proof (the tests replay it, and run the engine's own experts, through the real engine).
"""

from __future__ import annotations

import dataclasses
import random

from alfworld.gen import goal_library

from memex_jax.envs.alfworld import catalog
from memex_jax.envs.alfworld import layouts

MAX_INSTANCES = 3  # ALFRED's MAX_NUM_OF_OBJ_INSTANCES

Step = tuple[str, ...]  # (verb, object or receptacle ids...), e.g. ('take', obj_id, rec_id)


@dataclasses.dataclass(frozen=True)
class Task:
  """ALFRED `pddl_params` of one game ('' where a task type has no such target).

  Attributes:
    task_type: one of catalog.TASK_TYPES.
    object_target: class to manipulate, e.g. 'Apple'.
    parent_target: receptacle class to put it in.
    toggle_target: lamp class for look_at_obj_in_light.
  """

  task_type: str
  object_target: str
  parent_target: str = ""
  toggle_target: str = ""


@dataclasses.dataclass(frozen=True)
class Placement:
  """One object instance and the receptacle it starts in."""

  object_id: str
  kind: str
  receptacle_id: str


@dataclasses.dataclass(frozen=True)
class GameSpec:
  """Everything needed to write one game's files.

  Attributes:
    floor_plan: the FloorPlan the game is set in.
    task: what to achieve.
    task_text: the templated goal sentence (ALFRED's goal library templates).
    objects: object placements, sorted by id.
    agent_location: the agent's start pose (never a receptacle's pose).
    walkthrough: a plan that wins, as abstract steps over object ids.
  """

  floor_plan: layouts.FloorPlan
  task: Task
  task_text: str
  objects: tuple[Placement, ...]
  agent_location: layouts.Location
  walkthrough: tuple[Step, ...]


def _hosts(plan: layouts.FloorPlan, kind: str) -> list[layouts.Receptacle]:
  if kind in catalog.LAMPS:
    return [r for r in plan.receptacles if r.kind in catalog.LAMP_STANDS]
  return [r for r in plan.receptacles if catalog.can_contain(r.kind, kind)]


def _choose_task(plan: layouts.FloorPlan, task_type: str, rng: random.Random) -> Task | None:
  """Picks target classes the plan can host, or None when it cannot host `task_type`."""
  if plan.room not in catalog.task_rooms(task_type):
    return None
  kinds = [k for k in plan.object_kinds if k not in catalog.LAMPS and _hosts(plan, k)]
  if task_type == "look_at_obj_in_light":
    lamps = [k for k in plan.object_kinds if k in catalog.LAMPS and _hosts(plan, k)]
    if not lamps or not kinds:
      return None
    return Task(task_type, rng.choice(kinds), toggle_target=rng.choice(lamps))
  excluded = ""
  if task_type in catalog.APPLIANCE:
    excluded, prop, _ = catalog.APPLIANCE[task_type]
    if excluded not in plan.receptacle_kinds:
      return None
    kinds = [k for k in kinds if catalog.has_property(k, prop)]
  pairs = []
  for kind in kinds:
    parents = {r.kind for r in _hosts(plan, kind)} - {excluded}
    for parent in sorted(parents):
      # The targets must be able to start somewhere other than the goal receptacle class.
      if any(r.kind != parent for r in _hosts(plan, kind)):
        pairs.append((kind, parent))
  if not pairs:
    return None
  kind, parent = rng.choice(pairs)
  return Task(task_type, kind, parent_target=parent)


def _object_id(kind: str, near: layouts.Location, rng: random.Random, taken: set[str]) -> str:
  """An ALFRED-style id 'Kind|x|y|z' at world coordinates next to a receptacle's pose."""
  while True:
    x = near[0] * layouts.GRID_METRES + rng.uniform(-0.6, 0.6)
    z = near[1] * layouts.GRID_METRES + rng.uniform(-0.6, 0.6)
    object_id = f"{kind}|{x:+06.2f}|{rng.uniform(0.2, 1.8):+06.2f}|{z:+06.2f}"
    if object_id not in taken:
      taken.add(object_id)
      return object_id


def _place_objects(plan: layouts.FloorPlan, task: Task,
                   rng: random.Random) -> tuple[Placement, ...]:
  taken: set[str] = set()
  placements = []
  for kind in plan.object_kinds:
    hosts = _hosts(plan, kind)
    if kind == task.object_target:
      hosts = [r for r in hosts if r.kind != task.parent_target]
    if not hosts:
      continue
    if kind in catalog.LAMPS:
      count = 1
    elif kind == task.object_target and task.task_type == "pick_two_obj_and_place":
      count = rng.randint(2, MAX_INSTANCES)
    else:
      count = rng.randint(1, MAX_INSTANCES)
    for _ in range(count):
      host = rng.choice(hosts)
      placements.append(Placement(_object_id(kind, host.location, rng, taken), kind,
                                  host.object_id))
  return tuple(sorted(placements, key=lambda p: p.object_id))


class _Planner:
  """Builds the walkthrough step by step, tracking the agent's pose and opened receptacles."""

  def __init__(self, plan: layouts.FloorPlan, start: layouts.Location):
    self.receptacles = {r.object_id: r for r in plan.receptacles}
    self.location = start
    self.opened: set[str] = set()
    self.steps: list[Step] = []

  def cost_to_use(self, receptacle_id: str) -> int:
    rec = self.receptacles[receptacle_id]
    must_open = rec.kind in catalog.OPENABLE and receptacle_id not in self.opened
    return int(rec.location != self.location) + int(must_open)

  def walk_to(self, receptacle_id: str) -> None:
    rec = self.receptacles[receptacle_id]
    if rec.location != self.location:
      self.steps.append(("go", receptacle_id))
      self.location = rec.location

  def use(self, receptacle_id: str) -> None:
    """Walks to a receptacle and opens it if needed."""
    self.walk_to(receptacle_id)
    rec = self.receptacles[receptacle_id]
    if rec.kind in catalog.OPENABLE and receptacle_id not in self.opened:
      self.steps.append(("open", receptacle_id))
      self.opened.add(receptacle_id)

  def cheapest(self, receptacle_ids: list[str]) -> str:
    return min(receptacle_ids, key=lambda rid: (self.cost_to_use(rid), rid))


def _walkthrough(plan: layouts.FloorPlan, task: Task, objects: tuple[Placement, ...],
                 start: layouts.Location) -> tuple[Step, ...]:
  planner = _Planner(plan, start)
  targets = [p for p in objects if p.kind == task.object_target]
  needed = 2 if task.task_type == "pick_two_obj_and_place" else 1
  goal_receptacle = None
  lamp = next((p for p in objects if p.kind == task.toggle_target), None)

  def cost(target: Placement) -> tuple[int, str]:
    steps = planner.cost_to_use(target.receptacle_id)
    if lamp is not None:  # walking on to the lamp is free if it stands at the same place
      here = planner.receptacles[target.receptacle_id].location
      steps += int(planner.receptacles[lamp.receptacle_id].location != here)
    return steps, target.object_id

  for _ in range(needed):
    best = min(targets, key=cost)
    targets.remove(best)
    planner.use(best.receptacle_id)
    planner.steps.append(("take", best.object_id, best.receptacle_id))
    if task.task_type in catalog.APPLIANCE:
      appliance_kind, _, verb = catalog.APPLIANCE[task.task_type]
      appliance = planner.cheapest([r.object_id for r in plan.receptacles_of(appliance_kind)])
      planner.walk_to(appliance)
      planner.steps.append((verb, best.object_id, appliance))
    if lamp is not None:
      planner.walk_to(lamp.receptacle_id)
      planner.steps.append(("use", lamp.object_id))
      continue
    if goal_receptacle is None:
      goal_receptacle = planner.cheapest(
          [r.object_id for r in plan.receptacles_of(task.parent_target)])
    planner.use(goal_receptacle)
    planner.steps.append(("move", best.object_id, goal_receptacle))
  return tuple(planner.steps)


def _task_text(task: Task, rng: random.Random) -> str:
  template = rng.choice(goal_library.gdict[task.task_type]["templates"])
  return template.format(obj=task.object_target.lower(), recep=task.parent_target.lower(),
                         toggle=task.toggle_target.lower(), mrecep="")


def sample_game(plan: layouts.FloorPlan, task_type: str, rng: random.Random) -> GameSpec | None:
  """Samples a solvable game of `task_type` on `plan`, or None if the plan cannot host it."""
  if task_type not in catalog.TASK_TYPES:
    raise ValueError(f"unknown task type {task_type!r}; expected one of {catalog.TASK_TYPES}")
  task = _choose_task(plan, task_type, rng)
  if task is None:
    return None
  objects = _place_objects(plan, task, rng)
  needed = 2 if task_type == "pick_two_obj_and_place" else 1
  if sum(p.kind == task.object_target for p in objects) < needed:
    return None
  occupied = {r.location for r in plan.receptacles}
  while True:
    gx, gz = rng.choice(plan.floor_points)
    start = (gx, gz, rng.randrange(4), 30)
    if start not in occupied:
      break
  return GameSpec(
      floor_plan=plan,
      task=task,
      task_text=_task_text(task, rng),
      objects=objects,
      agent_location=start,
      walkthrough=_walkthrough(plan, task, objects, start),
  )
