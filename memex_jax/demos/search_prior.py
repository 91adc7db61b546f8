r"""Where things are found: P(receptacle type | object type) from training games' initial states.

A policy searching a room can know which receptacle types usually hold an object type; it cannot
know where this game put it. The scripted expert searches in the order this prior gives, so its
demonstrations search as a policy could. It is estimated from the games it is given (the
training split, never the evaluation games): every object of a game's PDDL initial state counts
once for the type of the receptacle it starts in; add-one smoothing over the receptacle types
seen keeps every type possible. Types are named as the engine shows them ('countertop').
"""

from __future__ import annotations

import collections
import dataclasses
import json
import re
from typing import Sequence

from memex_jax.envs.alfworld import games

_OBJECT_TYPE = re.compile(r"\(objectType (\S+) (\w+)Type\)")
_RECEPTACLE_TYPE = re.compile(r"\(receptacleType (\S+) (\w+)Type\)")
_IN_RECEPTACLE = re.compile(r"\(inReceptacle (\S+) (\S+)\)")


@dataclasses.dataclass(frozen=True)
class SearchPrior:
  """Counts of object types by the receptacle type they start in.

  Attributes:
    counts: object type -> receptacle type -> objects of that type that started there.
    receptacle_types: every receptacle type of the games counted (the smoothing's support).
    num_games: the games counted.
  """

  counts: dict[str, dict[str, int]]
  receptacle_types: tuple[str, ...]
  num_games: int

  def probability(self, object_type: str, receptacle_type: str) -> float:
    """P(receptacle type | object type), add-one smoothed (uniform for an unseen object type)."""
    row = self.counts.get(object_type, {})
    support = len(set(self.receptacle_types) | {receptacle_type})
    return (row.get(receptacle_type, 0) + 1) / (sum(row.values()) + support)

  def save(self, path: str) -> None:
    with open(path, "w") as f:
      json.dump(dataclasses.asdict(self), f, indent=1, sort_keys=True)

  @classmethod
  def load(cls, path: str) -> SearchPrior:
    with open(path) as f:
      record = json.load(f)
    return cls(record["counts"], tuple(record["receptacle_types"]), record["num_games"])


def initial_scene(game: str) -> tuple[set[str], list[tuple[str, str]]]:
  """A game's receptacle types and the (object type, receptacle type) of each object it starts
  with, named as the engine shows them."""
  with open(games.game_file(game)) as f:
    problem = json.load(f)["pddl_problem"]
  kinds = {name: kind.lower() for pattern in (_OBJECT_TYPE, _RECEPTACLE_TYPE)
           for name, kind in pattern.findall(problem)}
  placements = [(kinds[obj], kinds[host]) for obj, host in _IN_RECEPTACLE.findall(problem)
                if obj in kinds and host in kinds]
  return {kind.lower() for _, kind in _RECEPTACLE_TYPE.findall(problem)}, placements


def estimate(game_folders: Sequence[str]) -> SearchPrior:
  """The prior of these games (pass the training games only)."""
  if not game_folders:
    raise ValueError("estimating a search prior needs at least one game")
  counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
  receptacle_types = set()
  for game in game_folders:
    types, placements = initial_scene(game)
    receptacle_types |= types
    for object_type, receptacle_type in placements:
      counts[object_type][receptacle_type] += 1
  return SearchPrior({o: dict(sorted(c.items())) for o, c in sorted(counts.items())},
                     tuple(sorted(receptacle_types)), len(game_folders))
