"""ALFWorld text as the scripted expert reads and writes it: ids and their types, what an
observation lists, the walkthrough as steps, anchors, notes and tool calls, search decisions."""

from __future__ import annotations

import json
import re
from typing import Any, Iterator, Mapping, NamedTuple, Sequence

from memex_jax.agent import tool_response_body
from memex_jax.envs.alfworld.env import LISTING, LOOK
from memex_jax.envs.alfworld.instructions import THING_ID
from memex_jax.memory import AnchorError, extract_span

REFUSED = "Nothing happens"  # How the engine answers a command it refuses.


def mentions(text: str, thing_id: str) -> bool:
  """Whether `text` names the id as a whole ('cup 1' is not in 'cup 12')."""
  return re.search(rf"\b{re.escape(thing_id)}\b", text) is not None


def kind_of(thing_id: str) -> str:
  """The type of an id ('drawer 1' -> 'drawer')."""
  return thing_id.rsplit(" ", 1)[0]


def abstract(command: str) -> str:
  """A command with ids replaced by types: the plan without the exact ids."""
  return THING_ID.sub(lambda m: "the " + kind_of(m.group()), command)


FETCH = "find and "  # How a plan step that fetches a thing starts ("find and take a cloth").


def plan_step(op: str, arg: str) -> str:
  """A walkthrough step (`compile_walkthrough`) as a written plan names it, by types: a fetch by
  the kind it finds ("find and take a cloth"), a command by `abstract` ("clean the cloth with
  the sinkbasin"). Ids would be known before the search finds the thing, and a summary that
  named the receptacles would leave nothing to read back."""
  return f"{FETCH}{op} a {kind_of(arg)}" if op != "do" else abstract(arg)


def plan_of(steps: Sequence[tuple[str, str]]) -> list[str]:
  """A compiled walkthrough's steps (`compile_walkthrough`) as the written plan names them."""
  return [plan_step(op, arg) for op, arg in steps]


def seen_items(observation: str) -> list[str]:
  """Ids listed after 'you see' ('a knife 2, and a spoon 1.' -> ['knife 2', 'spoon 1'])."""
  _, _, listed = observation.partition("you see ")
  return re.findall(r"\ban? ([a-z]+ \d+)", listed)


def compile_walkthrough(walkthrough: Sequence[str]) -> list[tuple[str, str]]:
  """The walkthrough as steps: ("take" | "use", the planned object id) where it fetches a thing,
  ("do", command) otherwise.

  A fetch drops the walkthrough's own way to the thing (its `go to` and `open`): the expert
  fetches what it has seen, or searches. Commands the walkthrough does where it fetched go back
  there first.
  """
  steps: list[tuple[str, str]] = []
  at = None
  for command in walkthrough:
    verb, ids = command.split(" ")[0], THING_ID.findall(command)
    if verb in ("take", "use"):
      for way in (f"open {at}", f"go to {at}"):
        if steps and steps[-1] == ("do", way):
          steps.pop()
      steps.append((verb, ids[0]))
      continue
    if steps and steps[-1][0] != "do" and verb != "go" and at:
      steps.append(("do", f"go to {at}"))
    if verb == "go":
      at = ids[0]
    steps.append(("do", command))
  return steps


def tool_call(reasoning: str, name: str, **arguments: Any) -> str:
  return (f"{reasoning}\n<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n"
          "</tool_call>")


def listing_anchors(working: str, listing: str) -> dict[str, str] | None:
  """Anchors that select the look listing, in one fixed form a policy can copy: the engine's
  listing phrase, the first receptacle listed (right after it) and the listing's full stop (no
  id holds one, so the first after the phrase ends the listing); None where they do not select
  exactly `listing` (the phrase shown twice).

  The end anchor used to be the last receptacle listed, copied from ~1K tokens back: proof
  policies named one the room does not end with (7 rejections in two runs of 20 games,
  results/memex_cpu/README.md), and a rejected block rejects the whole compression."""
  items = seen_items(listing)
  if len(items) < 2:
    return None
  anchors = {"start_anchor": LISTING, "mid_anchor": items[0], "end_anchor": "."}
  try:
    return anchors if extract_span(working, *anchors.values()) == listing else None
  except AnchorError:
    return None


def search_notes(current: Sequence[tuple[str, str]], key_receptacles: Sequence[str] | None,
                 needed_kinds: Sequence[str]) -> str:
  """A compression's explicit note: what each receptacle searched in the segment held
  ((command, observation) pairs), and the actions done. Brief (`key_receptacles` given), it
  lists only the places the plan uses or holding a needed kind, naming the rest together."""
  contents: dict[str, list[str]] = {}
  done = []
  for command, observation in current:
    verb, target = command.split(" ")[0], (THING_ID.findall(command) or [""])[-1]
    if verb in ("go", "open", "examine") and "you see" in observation:
      contents[target] = seen_items(observation)
    elif verb not in ("go", "open", "close", "examine", LOOK):
      done.append(f"- done: {command}")
  listed = {r: items for r, items in contents.items() if items and (
      key_receptacles is None or r in key_receptacles or
      any(kind_of(i) in needed_kinds for i in items))}
  rest = [r for r in contents if r not in listed]
  label = "empty" if key_receptacles is None else "searched, nothing needed"
  return "\n".join([f"- {r}: {', '.join(items)}" for r, items in listed.items()] +
                   ([f"- {label}: {', '.join(rest)}"] if rest else []) + done)


# The expert's restate-then-decide form: the restated list, the sought kind, then ": none."
# (search on) or the id's number (take). With the kind named first, the deciding token is what
# follows that kind in the list just restated, if it is there: a lookup of the kind a language
# model's copying already does. Decided first (": no cloth." or ": cloth 1 is the ..."), the
# token was barely conditioned on the list (results/memex_cpu/2026-12-06f/decision_probe.md).
SEARCH_ON = ": none"
DECISION = re.compile(rf"([a-z]+ \d+) has ([^:]*): ([a-z]+)({SEARCH_ON}\b| \d+\b)")

# How a search's first go writes its order ("Places to search for a fork, likeliest first:
# drawer 2 > drawer 1 > ... . I go to drawer 2 first."): the kind and the order, as far as it
# names whole ids (a policy's order may run on to the turn's cap).
WRITTEN_ORDER = re.compile(r"[Pp]laces to search for a ([a-z]+), likeliest first: "
                           r"([a-z]+ \d+(?: > [a-z]+ \d+)*)")
# How each next go of a search names its place: the place just searched, then the one after it
# in the order ("Next: fridge 1 > countertop 3.").
NEXT_LOOKUP = re.compile(r"Next: ([a-z]+ \d+) > ([a-z]+ \d+)\.")
# How the expert with `plan_steps` writes the plan at its first step and in every summary
# ("Task plan: find and take a cloth > go to the sinkbasin > ..."), and looks up each later step
# in it ("Step: find and take a cloth > go to the sinkbasin.").
WRITTEN_PLAN = re.compile(r"Task plan: ([^.]+)\.")
STEP_LOOKUP = re.compile(r"Step: ([^>.]+) > ([^.]+)\.")


class Decision(NamedTuple):
  """A restate-then-decide turn: `turn` indexes the segment's messages; `match` is DECISION's
  match in the turn's text; `items` what the observation before it listed."""
  turn: int
  match: re.Match
  items: list[str]
  present: bool

  @property
  def takes(self) -> bool:
    return self.match[4] != SEARCH_ON

  @property
  def decides_at(self) -> int:
    """Where in the turn's text the decision starts: right after the sought kind."""
    return self.match.end(3)

  @property
  def restated_exactly(self) -> bool:
    return self.match[2] == (", ".join(self.items) or "nothing")


def segment_decisions(messages: Sequence[Mapping[str, str]]) -> Iterator[Decision]:
  """The decisions right after an observation that listed a searched place's contents, in one
  segment ({role, content} messages)."""
  for turn, (before, message) in enumerate(zip(messages, messages[1:]), start=1):
    observation = tool_response_body(before["content"]) if before["role"] == "user" else None
    # The room's listing (read back from memory) also says "you see", but lists receptacles,
    # not what a searched place holds.
    if (message["role"] != "assistant" or not observation or "you see" not in observation or
        LISTING in observation):
      continue
    decision = DECISION.search(message["content"].split("<tool_call>")[0])
    if not decision:
      continue
    items = seen_items(observation)
    yield Decision(turn, decision, items, any(kind_of(item) == decision[3] for item in items))
