r"""The scripted ALFWorld expert of `demos.alfworld`: plays one game, writing Memex tool calls.

It plays the game's expert solution (the walkthrough the game file ships) after a survey of the
room: `look` once, then visit receptacles (open, note, close) with the solution's receptacles
among the first, so that the objects are found early. Whenever ContextStatus reports working >
threshold, it calls CompressExperience: the look listing and each observation that found a
needed object are archived verbatim by anchors, a note of every receptacle's contents and of the
actions done is written explicitly (db_content), and the progress state keeps types, not ids.
When the next action needs an id the working context no longer shows, it calls ReadExperience on
the smallest block holding it, and the action then uses what it read.

`DemonstrationConfig` (SmolLM2's ALFWorld preset by default) lives here because the expert reads
it; `demos.alfworld` re-exports it.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from typing import Any, Sequence

from memex_jax.agent import IM_END, AgentConfig, tool_response_body
from memex_jax.agent.presets import smollm2_alfworld
from memex_jax.demos.errors import DemonstrationError
from memex_jax.envs.alfworld.env import LISTING, LOOK, AlfWorldConfig, memex_harder
from memex_jax.envs.alfworld.instructions import THING_ID
from memex_jax.memory import (COMPRESS, READ, AnchorError, TextTokenizer, extract_span,
                              parse_status)

_PLAN_SHOWN = 6  # Plan steps a progress state spells out.
_VERB_ING = {"heat": "Heating", "cool": "Cooling", "clean": "Cleaning"}


@dataclasses.dataclass(frozen=True)
class DemonstrationConfig:
  """How demonstrations are played.

  Attributes:
    agent: the agent loop's settings (the SmolLM2 preset by default).
    env: the ALFWorld wrapper's options (Memex harder by default).
    min_survey: receptacles searched at least (all of them in smaller rooms).
    max_survey: receptacles searched at most before acting, unless nothing was compressed yet.
    step_reserve: agent turns kept free for compressions and reads after the survey.
  """

  agent: AgentConfig = dataclasses.field(default_factory=smollm2_alfworld)
  env: AlfWorldConfig = dataclasses.field(default_factory=memex_harder)
  min_survey: int = 5
  max_survey: int = 9
  step_reserve: int = 6

  def __post_init__(self):
    if not 1 <= self.min_survey <= self.max_survey:
      raise ValueError(f"DemonstrationConfig needs 1 <= min_survey <= max_survey, got "
                       f"{self.min_survey}, {self.max_survey}")


def _mentions(text: str, thing_id: str) -> bool:
  return re.search(rf"\b{re.escape(thing_id)}\b", text) is not None


def _kind(thing_id: str) -> str:
  return thing_id.rsplit(" ", 1)[0]


def _abstract(command: str) -> str:
  """A command with ids replaced by types: the plan without the exact ids."""
  return THING_ID.sub(lambda m: "the " + _kind(m.group()), command)


def _seen_items(observation: str) -> list[str]:
  """Ids listed after 'you see' ('a knife 2, and a spoon 1.' -> ['knife 2', 'spoon 1'])."""
  _, _, listed = observation.partition("you see ")
  return re.findall(r"\ban? ([a-z]+ \d+)", listed)


def _call(reasoning: str, name: str, **arguments: Any) -> str:
  return (f"{reasoning}\n<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n"
          "</tool_call>")


def _anchors(working: str, span: str, mid_hint: str) -> dict[str, str] | None:
  """start/mid/end anchors that select exactly `span` of `working`, or None."""
  words = span.split(" ")
  for n in range(3, len(words)):
    start = " ".join(words[:n])
    if working.count(start) == 1:
      break
  else:
    return None
  for n in range(2, len(words) - 2):
    end = " ".join(words[-n:])
    inner = span[len(start):len(span) - len(end)]
    mid = mid_hint if mid_hint in inner else " ".join(inner.split()[:2])
    try:
      if mid and extract_span(working, start, mid, end) == span:
        return {"start_anchor": start, "mid_anchor": mid, "end_anchor": end}
    except AnchorError:
      continue
  return None


class Demonstrator:
  """Chooses each turn from the decoded context (a script entry of `ScriptedPolicy`)."""

  def __init__(self, walkthrough: Sequence[str], config: DemonstrationConfig, rng: random.Random,
               tokenizer: TextTokenizer):
    self._plan = list(walkthrough)
    self._config, self._rng, self._tokenizer = config, rng, tokenizer
    self._expected: tuple[str, str] | None = None  # (memory tool, what its reply must start with)
    self._plan_at = 0
    self._queue: list[str] = [LOOK]
    self._surveying = True
    self._survey: list[str] = []  # Receptacles still to search.
    self._surveyed: list[str] = []
    self._visit: str | None = None  # The receptacle a survey `go to` is heading for.
    self._awaiting: str | None = None
    self._read: str | None = None  # The index read by the previous turn.
    self._location: str | None = None
    self._holding: str | None = None
    self._log: list[tuple[int, str, str]] = []  # (segment, command, observation)
    self._blocks: dict[str, str] = {}  # index -> archived content
    self._segment = self._turns = 0
    self._key_objects = [THING_ID.findall(c)[0] for c in self._plan
                         if c.startswith(("take ", "use "))]
    self._key_receptacles = list(dict.fromkeys(c.removeprefix("go to ") for c in self._plan
                                               if c.startswith("go to ")))

  def __call__(self, context: str) -> str:
    self._turns += 1
    working = context.split(IM_END, 2)[2]
    latest = tool_response_body(working) or ""
    if self._expected and not latest.startswith(self._expected[1]):
      raise DemonstrationError(f"{self._expected[0]} was rejected: {latest[:300]}")
    self._expected = None
    if self._awaiting is not None:
      self._record(self._awaiting, latest)
      self._awaiting = None
    status = parse_status(working)
    if status and status.over:
      return self._compress(working)
    command = self._next_command()
    missing = [i for i in self._needed_ids(command) if not _mentions(working, i)]
    readable = {index: content for index, content in self._blocks.items()
                if content not in working and any(_mentions(content, i) for i in missing)}
    if readable:
      self._read = min(readable, key=lambda k: (-sum(_mentions(readable[k], i) for i in missing),
                                                len(readable[k])))
      self._expected = (READ, self._blocks[self._read])
      return _call(f"I need the exact id of the {' and the '.join(map(_kind, missing))}; it is "
                   f"archived under {self._read}, so I read it back instead of searching again.",
                   READ, index=self._read)
    self._queue.pop(0)
    self._awaiting = command
    reason = self._reason(command)
    if self._read:
      reason, self._read = f"From {self._read}: {reason[0].lower()}{reason[1:]}", None
    return _call(reason, "execute", command=command)

  # What to do next.

  def _next_command(self) -> str:
    if not self._queue and self._surveying:
      if self._survey and self._keep_surveying():
        self._visit = self._survey.pop(0)
        self._queue.append(f"go to {self._visit}")
      else:
        self._surveying = False
    while not self._queue and self._plan_at < len(self._plan):
      command = self._plan[self._plan_at]
      self._plan_at += 1
      if command != f"go to {self._location}":
        self._queue.append(command)
    if not self._queue:
      raise DemonstrationError("the walkthrough ended without winning")
    return self._queue[0]

  def _keep_surveying(self) -> bool:
    done, config = len(self._surveyed), self._config
    # The plan may need a read before each of its moves.
    plan_turns = len(self._plan) + sum(c.startswith("go to ") for c in self._plan)
    if config.agent.max_steps - self._turns - plan_turns - config.step_reserve < 3:
      return False
    if any(k in self._survey for k in self._key_receptacles) or done < config.min_survey:
      return True
    return done < config.max_survey or self._segment == 0

  def _needed_ids(self, command: str) -> list[str]:
    """Ids the command names, plus, on the way to take or use something, that thing's id."""
    things = []
    if command.startswith("go to ") and not self._surveying:
      for later in self._plan[self._plan_at:]:
        if later.startswith("go to "):
          break
        if later.startswith(("take ", "use ")):
          things.append(THING_ID.findall(later)[0])
    return list(dict.fromkeys(things + THING_ID.findall(command)))

  def _record(self, command: str, observation: str) -> None:
    verb, _, target = command.partition(" ")
    if observation.startswith("Nothing happens") and verb == "go":
      # Receptacles sharing a spot cannot be gone to from each other: examine it from here.
      if command == f"go to {self._visit}":
        self._queue.append(f"examine {self._visit}")
      return
    if observation.startswith("Nothing happens") or not observation:
      raise DemonstrationError(f"{command!r} failed: {observation!r}")
    self._log.append((self._segment, command, observation))
    if command == LOOK:
      self._plan_survey(_seen_items(observation))
    elif self._visit and command in (f"go to {self._visit}", f"examine {self._visit}"):
      self._location = self._location if verb == "examine" else self._visit
      self._surveyed.append(self._visit)
      if f"The {self._visit} is closed." in observation:
        self._queue += [f"open {self._visit}", f"close {self._visit}"]
      self._visit = None
    elif verb == "go":
      self._location = target.removeprefix("to ")
    elif verb == "take":
      self._holding = target.split(" from ")[0]
    elif verb == "move":
      self._holding = None

  def _plan_survey(self, receptacles: list[str]) -> None:
    """Needed receptacles among the first `min_survey` visits, then the others."""
    keys = [r for r in self._key_receptacles if r in receptacles]
    others = [r for r in receptacles if r not in keys]
    self._rng.shuffle(others)
    extra = max(0, self._config.min_survey - len(keys))
    early = keys + others[:extra]
    self._rng.shuffle(early)
    self._survey = early + others[extra:]

  # Turns.

  def _reason(self, command: str) -> str:
    verb = command.split(" ")[0]
    ids = THING_ID.findall(command)
    pick = self._rng.choice
    if command == LOOK:
      return pick(["The room's receptacles are hidden and look works only once, so I look now.",
                   "First I need to know which receptacles are here; look is allowed once."])
    if self._surveying:
      if verb == "go":
        return pick([f"I have not searched {ids[0]} yet; going there.",
                     f"Next I check {ids[0]} to map what the room holds.",
                     f"Continuing the survey with {ids[0]}."])
      if verb == "examine":
        return (f"Nothing happened: {ids[0]} must share the spot I am at, so I examine it from "
                "here.")
      if verb == "open":
        return pick([f"{ids[0]} is closed; I open it to see inside.",
                     f"I open {ids[0]} to check its contents."])
      found = [o for o in self._key_objects if o in _seen_items(self._log[-1][2])]
      if found:
        return (f"{ids[0]} holds {' and '.join(found)}, which the task needs; I note it and "
                f"close {ids[0]} for now.")
      return pick([f"Done with {ids[0]}; I close it again.",
                   f"Closing {ids[0]} to leave the room as it was."])
    needed = self._needed_ids(command)
    if verb == "go" and len(needed) > 1:
      return f"The {needed[0]} I need is at {ids[0]}; going there."
    if verb == "go":
      purpose = f" with {self._holding}" if self._holding else ""
      return f"The next step of my plan is at {ids[0]}; I go there{purpose}."
    return {"take": f"{ids[0]} is here; I take it.",
            "open": f"{ids[0]} is closed; I open it.",
            "close": f"I close {ids[0]} again.",
            "move": f"I put {ids[0]} in {ids[-1]}.",
            "use": f"I turn on {ids[0]} to look at what I hold under its light.",
            }.get(verb, f"{_VERB_ING.get(verb, 'Doing')} {' with '.join(ids)}: {command}.")

  def _compress(self, working: str) -> str:
    """CompressExperience: anchored verbatim blocks, one explicit note, a type-level plan."""
    current = [(c, obs) for s, c, obs in self._log if s == self._segment]
    self._segment += 1
    if not self._keep_surveying():
      self._survey = []  # The visit in progress ends the survey.
    blocks = []

    def archive(index: str, description: str, span: str, mid: str) -> None:
      anchors = _anchors(working, span, mid)
      if anchors:
        blocks.append({"index": index, "description": description, **anchors})
        self._blocks[index] = span

    looked = [obs for c, obs in current if c == LOOK]
    if looked and "room_listing" not in self._blocks:
      listing = looked[0][looked[0].index(LISTING):]
      items = _seen_items(listing)
      archive("room_listing", "receptacle ids in the room (look, verbatim)",
              listing, items[len(items) // 2])
    for thing in self._key_objects:
      seen = [obs for _, obs in current if thing in _seen_items(obs)]
      if seen and not any(_mentions(content, thing) for content in self._blocks.values()):
        archive(self._new_index(f"found_{_kind(thing)}"),
                f"where a {_kind(thing)} was seen (verbatim)", seen[0], thing)
    found = sorted({_kind(o) for o in self._key_objects
                    if any(o in _seen_items(obs) for _, _, obs in self._log)})
    remaining = [_abstract(c) for c in self._queue]
    if self._survey:
      remaining.append(f"{len(self._survey)} more receptacles to search")
    remaining += [_abstract(c) for c in self._plan[self._plan_at:]]
    if len(remaining) > _PLAN_SHOWN:
      remaining = remaining[:_PLAN_SHOWN] + [f"{len(remaining) - _PLAN_SHOWN} more steps"]
    summary = (f"Done: used look (it is no longer available); {len(self._surveyed)} receptacles "
               f"searched; found {', '.join('the ' + k for k in found) or 'nothing needed yet'}"
               f".\nHolding: {self._holding or 'nothing'}.\nNext: {', '.join(remaining)}.\n"
               "Exact ids are archived: read the block you need before acting on it.")
    index = self._new_index(f"notes_{self._segment}")
    for brief in (False, True):  # Brief notes name only what the task needs.
      notes = self._notes(current, brief)
      turn = _call("The working context is over the threshold: I archive the listing, what I "
                   "found and my notes, and keep a short plan.", COMPRESS, summary=summary,
                   db_blocks=blocks + [{"index": index, "description": "receptacle contents "
                                        "and actions done (exact ids)", "db_content": notes}])
      size = len(self._tokenizer.encode(turn)) + 1  # + <|im_end|>
      if size <= self._config.agent.max_turn_tokens:
        self._blocks[index] = notes
        self._expected = (COMPRESS, "[Indexed Summary]")
        return turn
    raise DemonstrationError(f"the CompressExperience turn needs {size} tokens, over "
                             f"max_turn_tokens={self._config.agent.max_turn_tokens}")

  def _notes(self, current: list[tuple[str, str]], brief: bool) -> str:
    """What each receptacle searched since the last compression held, and the actions done."""
    contents: dict[str, list[str]] = {}
    done = []
    for command, observation in current:
      verb, target = command.split(" ")[0], (THING_ID.findall(command) or [""])[-1]
      if verb in ("go", "open", "examine") and "you see" in observation:
        contents[target] = _seen_items(observation)
      elif verb not in ("go", "open", "close", "examine", LOOK):
        done.append(f"- done: {command}")
    needed = set(self._key_objects) | set(self._key_receptacles)
    listed = {r: items for r, items in contents.items()
              if items and (not brief or needed & {r, *items})}
    rest = [r for r in contents if r not in listed]
    label = "searched, nothing needed" if brief else "empty"
    return "\n".join([f"- {r}: {', '.join(items)}" for r, items in listed.items()] +
                     ([f"- {label}: {', '.join(rest)}"] if rest else []) + done)

  def _new_index(self, base: str) -> str:
    index, n = base, 1
    while index in self._blocks:
      n += 1
      index = f"{base}_{n}"
    return index

