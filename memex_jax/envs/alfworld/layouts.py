"""The 120 ALFRED floor plans shipped in the alfworld wheel, and the official scene splits.

Each plan ships three files under `alfworld/gen/layouts/`:
  FloorPlanN-objects.json   classes present in the scene (objects and receptacles),
  FloorPlanN-openable.json  receptacle ids -> the pose [x, z, rotation, horizon] from which
                            ALFRED's generator interacts with them,
  FloorPlanN-layout.npy     reachable floor points [P, 2] (x, z in metres).
Locations follow ALFRED's convention `loc|x/0.25|z/0.25|rotation/90|horizon`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import random

from alfworld.gen import constants as alfred_constants
import numpy as np

from memex_jax.envs.alfworld import catalog

LAYOUT_DIR = os.path.join(os.path.dirname(alfred_constants.__file__), "layouts")
GRID_METRES = alfred_constants.AGENT_STEP_SIZE  # 0.25

# ALFRED's validation-unseen scenes; they never appear in train or valid_seen.
UNSEEN_FLOOR_PLANS = (10, 219, 308, 424)
SPLITS = ("train", "valid_seen", "valid_unseen")

Location = tuple[int, int, int, int]  # grid x, grid z, rotation / 90, camera horizon


@dataclasses.dataclass(frozen=True)
class Receptacle:
  """One receptacle instance of a floor plan.

  Attributes:
    object_id: ALFRED object id, e.g. 'Cabinet|+00.02|+02.01|+01.31'.
    kind: receptacle class, e.g. 'Cabinet', 'SinkBasin'.
    location: where the agent stands to use it.
  """

  object_id: str
  kind: str
  location: Location


@dataclasses.dataclass(frozen=True)
class FloorPlan:
  """One ALFRED scene as the shipped files describe it.

  Attributes:
    number: N of FloorPlanN.
    room: 'Kitchen', 'LivingRoom', 'Bedroom' or 'Bathroom'.
    receptacles: every static receptacle instance, sorted by id.
    object_kinds: placeable object classes present in the scene (lamps included), sorted.
    floor_points: reachable grid points (x, z), sorted.
  """

  number: int
  room: str
  receptacles: tuple[Receptacle, ...]
  object_kinds: tuple[str, ...]
  floor_points: tuple[tuple[int, int], ...]

  def receptacles_of(self, kind: str) -> list[Receptacle]:
    return [r for r in self.receptacles if r.kind == kind]

  @property
  def receptacle_kinds(self) -> frozenset[str]:
    return frozenset(r.kind for r in self.receptacles)


def floor_plan_numbers(split: str) -> tuple[int, ...]:
  """Floor plans a split draws from: valid_seen shares train's plans, valid_unseen never does."""
  if split not in SPLITS:
    raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
  if split == "valid_unseen":
    return UNSEEN_FLOOR_PLANS
  return tuple(n for n in alfred_constants.TRAIN_SCENE_NUMBERS if n not in UNSEEN_FLOOR_PLANS)


def _receptacle_kind(object_id: str) -> str:
  # Basins carry their class last: 'Sink|-01.90|+00.97|-01.50|SinkBasin'.
  parts = object_id.split("|")
  return parts[-1] if parts[-1].endswith("Basin") else parts[0]


def _grid(metres: float) -> int:
  return int(round(metres / GRID_METRES))


def stable_rng(*key: object) -> random.Random:
  """A random.Random seeded from `key` identically in every process and Python run."""
  digest = hashlib.sha256(repr(key).encode()).digest()
  return random.Random(int.from_bytes(digest[:8], "little"))


def _read(path: str):
  if not os.path.exists(path):
    raise FileNotFoundError(f"missing ALFRED layout file {path}")
  return np.load(path) if path.endswith(".npy") else json.load(open(path))


@functools.cache
def load_floor_plan(number: int) -> FloorPlan:
  """Reads FloorPlan`number` from the shipped layout files."""
  stem = os.path.join(LAYOUT_DIR, f"FloorPlan{number}")
  classes = set(_read(f"{stem}-objects.json"))
  poses = _read(f"{stem}-openable.json")
  points = _read(f"{stem}-layout.npy")  # P 2
  floor_points = tuple(sorted({(_grid(x), _grid(z)) for x, z in points}))

  receptacles = []
  for object_id, (x, z, rotation, horizon) in sorted(poses.items()):
    kind = _receptacle_kind(object_id)
    if kind in catalog.STATIC_RECEPTACLES:
      location = (_grid(x), _grid(z), int(rotation) // 90 % 4, int(horizon))
      receptacles.append(Receptacle(object_id, kind, location))
  # Receptacle classes the scene lists without a precomputed pose (stove burners, toasters,
  # towel holders, ...) get one instance at a reachable point chosen by a stable hash.
  posed = {r.kind for r in receptacles}
  for kind in sorted((classes & catalog.STATIC_RECEPTACLES) - posed):
    rng = stable_rng(number, kind)
    gx, gz = rng.choice(floor_points)
    object_id = f"{kind}|{gx * GRID_METRES:+06.2f}|+00.90|{gz * GRID_METRES:+06.2f}"
    receptacles.append(Receptacle(object_id, kind, (gx, gz, rng.randrange(4), 30)))

  object_kinds = sorted(k for k in classes
                        if k in catalog.placeable_kinds() or k in catalog.LAMPS)
  return FloorPlan(
      number=number,
      room=catalog.room_of(number),
      receptacles=tuple(sorted(receptacles, key=lambda r: r.object_id)),
      object_kinds=tuple(object_kinds),
      floor_points=floor_points,
  )
