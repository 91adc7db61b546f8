"""Partial credit on ALFWorld: the share of a game's goal conditions that hold in a state.

The text engine reports only `won`; ALFWorld's evaluations also give goal-condition success,
the share of the task's conditions met (a hot bread that never reached the fridge meets one of
two). Here the conditions are read off the game's own PDDL goal: static literals (types,
affordances, where receptacles stand) decide which entities may fill the goal's variables; every
other literal is a condition; an existential takes the binding under which most of them hold.
"""

from __future__ import annotations

import collections
import re
from typing import Iterable, Sequence

# Predicates no action changes: they constrain bindings and are not conditions.
STATIC = frozenset({"objecttype", "receptacletype", "cleanable", "heatable", "coolable",
                    "toggleable", "sliceable", "openable", "pickupable", "isreceptacleobject",
                    "receptacleatlocation", "cancontain", "="})
_TOKEN = re.compile(r"[()]|[^\s()]+")

Node = tuple  # ("and", [..]) | ("or", [..]) | ("not", node) | ("exists", vars, node) | atom
Fact = tuple  # (predicate, arg, ...), lower case


def parse_goal(pddl_problem: str) -> Node:
  """The (:goal ...) of a PDDL problem as nested tuples, names lower-cased."""
  text = re.sub(r";[^\n]*", "", pddl_problem).lower()
  start = text.find("(:goal")
  if start < 0:
    raise ValueError("the PDDL problem has no (:goal ...)")
  tokens = _TOKEN.findall(text[start:])
  tree, _ = _read(tokens, 0)
  if len(tree) != 2:
    raise ValueError(f"malformed (:goal ...): {tree!r}")
  return _node(tree[1])


def _read(tokens: Sequence[str], i: int) -> tuple[list | str, int]:
  if tokens[i] != "(":
    return tokens[i], i + 1
  items, i = [], i + 1
  while i < len(tokens) and tokens[i] != ")":
    item, i = _read(tokens, i)
    items.append(item)
  if i >= len(tokens):
    raise ValueError("unbalanced parentheses in the PDDL goal")
  return items, i + 1


def _variables(declaration: list) -> list[tuple[str, str]]:
  """[?a - t ?b - t ...] (or the '#' separator of ALFWorld's goal library) as (name, type)."""
  names, out, i = [], [], 0
  while i < len(declaration):
    if declaration[i] in ("-", "#"):
      out += [(name, declaration[i + 1]) for name in names]
      names, i = [], i + 2
    else:
      names.append(declaration[i])
      i += 1
  return out + [(name, "object") for name in names]


def _node(tree: list | str) -> Node:
  if isinstance(tree, str) or not tree:
    raise ValueError(f"unexpected PDDL goal element {tree!r}")
  head = tree[0]
  if head in ("and", "or"):
    return (head, [_node(t) for t in tree[1:]])
  if head == "not":
    return ("not", _node(tree[1]))
  if head == "exists":
    return ("exists", _variables(tree[1]), _node(tree[2]))
  if head == "forall":
    raise ValueError("forall goals (place_all_obj_type) are not scored")
  return ("atom", head, tuple(tree[1:]))


class GoalConditions:
  """Counts a goal's conditions that hold in a set of facts."""

  def __init__(self, goal: Node):
    self.goal = goal

  def share_met(self, facts: Iterable[Fact], entity_types: dict[str, str]) -> float:
    """Met conditions over all conditions under the best binding, in [0, 1].

    Args:
      facts: the state's true propositions as (predicate, arg, ...) tuples.
      entity_types: every entity's PDDL type (object, receptacle, agent, location, ...).
    """
    by_type = collections.defaultdict(list)
    for name, kind in entity_types.items():
      by_type[kind].append(name)
    met, total = self._count(self.goal, {}, frozenset(facts), by_type)
    return met / total if total else 0.0

  def _count(self, node: Node, binding: dict, facts: frozenset, by_type) -> tuple[int, int] | None:
    """(met, total) under `binding`; None when a static literal rules the binding out."""
    kind = node[0]
    if kind == "atom":
      holds = self._holds(node, binding, facts)
      if _static(node, binding, facts):
        return (0, 0) if holds else None
      return (int(holds), 1)
    if kind == "not":
      inner = node[1]
      if inner[0] == "atom" and _static(inner, binding, facts):
        return None if self._holds(inner, binding, facts) else (0, 0)
      counted = self._count(inner, binding, facts, by_type)
      return None if counted is None else (counted[1] - counted[0], counted[1])
    if kind == "and":
      met = total = 0
      for child in sorted(node[1], key=lambda c: c[0] != "atom"):  # cheap checks first
        counted = self._count(child, binding, facts, by_type)
        if counted is None:
          return None
        met, total = met + counted[0], total + counted[1]
      return met, total
    if kind == "or":
      options = [c for c in (self._count(n, binding, facts, by_type) for n in node[1]) if c]
      return max(options, key=_share) if options else None
    return self._best_binding(node, binding, facts, by_type)

  def _best_binding(self, node: Node, binding: dict, facts: frozenset, by_type):
    _, variables, body = node
    statics = _required_statics(body)
    best = None

    def bind(i: int, current: dict):
      nonlocal best
      if i == len(variables):
        counted = self._count(body, current, facts, by_type)
        if counted is not None and (best is None or _share(counted) > _share(best)):
          best = counted
        return
      name, kind = variables[i]
      for entity in by_type.get(kind, ()):
        trial = {**current, name: entity}
        # Prune on the static literals this variable completes.
        if all(self._holds(a, trial, facts) for a in statics
               if name in a[2] and all(not x.startswith("?") or x in trial for x in a[2])):
          bind(i + 1, trial)

    bind(0, dict(binding))
    return best if best is not None else (0, _conditions(body))

  @staticmethod
  def _holds(atom: Node, binding: dict, facts: frozenset) -> bool:
    args = tuple(binding.get(a, a) for a in atom[2])
    if atom[1] == "=":
      return args[0] == args[1]
    return (atom[1], *args) in facts


def _static(atom: Node, binding: dict, facts: frozenset) -> bool:
  """A static predicate, or where a fixed object stands (a desk lamp never leaves its desk)."""
  if atom[1] in STATIC:
    return True
  return atom[1] == "inreceptacle" and ("pickupable", binding.get(atom[2][0])) not in facts


def _required_statics(body: Node) -> list[Node]:
  """The static atoms every binding of `body` must satisfy (its own, or its `and`'s)."""
  children = body[1] if body[0] == "and" else [body]
  return [c for c in children if c[0] == "atom" and c[1] in STATIC]


def _conditions(node: Node) -> int:
  """How many conditions a node counts when nothing can fill its variables."""
  if node[0] == "atom":
    return int(node[1] not in STATIC)
  if node[0] == "not":
    return _conditions(node[1])
  if node[0] == "exists":
    return _conditions(node[2])
  counts = [_conditions(child) for child in node[1]]
  return sum(counts) if node[0] == "and" else max(counts, default=0)


def _share(counted: tuple[int, int]) -> tuple[float, int]:
  met, total = counted
  return (met / total if total else 1.0, met)
