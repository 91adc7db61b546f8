"""What ALFWorld's shipped tables say about object and receptacle classes.

Everything here is read from `alfworld.gen.constants` and `alfworld.gen.goal_library`, the
tables ALFRED's own generator used; the only addition is `LAMP_STANDS` (see its comment).
"""

from __future__ import annotations

import functools

from alfworld.gen import constants as alfred_constants

# The six ALFWorld task types, in ALFWorld's own numbering order.
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)

# ALFWorld's training split (3,553 games) has this task mix; we sample task types with it.
TRAIN_TASK_MIX = {
    "pick_and_place_simple": 790,
    "look_at_obj_in_light": 308,
    "pick_clean_then_place_in_recep": 650,
    "pick_heat_then_place_in_recep": 459,
    "pick_cool_then_place_in_recep": 533,
    "pick_two_obj_and_place": 813,
}

# The appliance each state-changing task needs, the object property it requires, and the verb.
APPLIANCE = {
    "pick_clean_then_place_in_recep": ("SinkBasin", "Cleanable", "clean"),
    "pick_heat_then_place_in_recep": ("Microwave", "Heatable", "heat"),
    "pick_cool_then_place_in_recep": ("Fridge", "Coolable", "cool"),
}

LAMPS = ("DeskLamp", "FloorLamp")

# Lamps cannot be picked up, so the receptacle table never lists a container for them; in the
# ALFRED scenes they stand on furniture, and the domain's ToggleObject needs them `inReceptacle`.
LAMP_STANDS = ("Desk", "SideTable", "Dresser", "Shelf", "CoffeeTable", "TVStand", "Ottoman")

OPENABLE = frozenset(alfred_constants.OPENABLE_CLASS_LIST)

# Receptacles fixed in the room (movable ones like Bowl or Mug are ordinary objects here, as the
# domain's actions on receptacle objects are disabled).
STATIC_RECEPTACLES = frozenset(alfred_constants.RECEPTACLES) - frozenset(
    alfred_constants.MOVABLE_RECEPTACLES)

_PROPERTY_PREDICATES = (
    ("Heatable", "heatable"),
    ("Coolable", "coolable"),
    ("Cleanable", "cleanable"),
    ("Toggleable", "toggleable"),
    ("Sliceable", "sliceable"),
)


def room_of(floor_plan: int) -> str:
  """Returns the room type ('Kitchen', 'LivingRoom', 'Bedroom', 'Bathroom') of a floor plan."""
  for room, numbers in alfred_constants.SCENE_TYPE.items():
    if floor_plan in numbers:
      return room
  raise ValueError(f"FloorPlan{floor_plan} is in no ALFRED scene range")


def task_rooms(task_type: str) -> frozenset[str]:
  """Rooms in which ALFRED generates `task_type`."""
  return frozenset(alfred_constants.GOALS_VALID[task_type])


def can_contain(receptacle_kind: str, object_kind: str) -> bool:
  """Whether the receptacle table lets `object_kind` be placed in `receptacle_kind`."""
  return object_kind in alfred_constants.VAL_RECEPTACLE_OBJECTS.get(receptacle_kind, ())


@functools.cache
def placeable_kinds() -> frozenset[str]:
  """Object classes that some receptacle can hold (the pickupable, placeable ones)."""
  kinds = set()
  for contents in alfred_constants.VAL_RECEPTACLE_OBJECTS.values():
    kinds.update(contents)
  return frozenset(kinds - STATIC_RECEPTACLES)


def has_property(object_kind: str, prop: str) -> bool:
  """Whether `object_kind` has an action property ('Heatable', 'Cleanable', ...)."""
  return object_kind in alfred_constants.VAL_ACTION_OBJECTS[prop]


def property_predicates(object_kind: str) -> list[str]:
  """PDDL unary predicates (`heatable`, `toggleable`, ...) that hold for `object_kind`."""
  return [pred for prop, pred in _PROPERTY_PREDICATES if has_property(object_kind, prop)]
