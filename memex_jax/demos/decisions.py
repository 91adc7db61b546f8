r"""How an ALFWorld policy's search decisions match what the engine showed.

The expert's turn after a search's visit restates what the place holds and the kind it seeks,
then decides: "<place> has <list>: <kind>: none." (search on) or "...: <id> is the <kind> the
task needs" / "...: <id> is here, so I stop searching" (take; the id starts with the kind). A
policy cloned from it writes the same, and this counts each such decision against the
observation it follows: whether the place held the kind, whether the restated list is the
engine's exactly. The expert's own demonstrations decide right every time, except the refused
takes it plays on purpose (`DemonstrationConfig.wrong_take_rate`). It also counts where the
policy went: the go-tos that return to a place it had gone to before, and the search orders it
wrote ("likeliest first: A > B > ...") that name a place twice or one the room does not have,
its next-place lookups ("Next: A > B."), the refused commands it repeated at once, the refused
takes naming a place other than the one it had gone to, and the plan it writes ("Task plan:
...", the expert's for the game or not) and its step lookups in it.

  python -m memex_jax.demos.decisions \
      "fifteenth=WORKDIR/eval_sft/trajectories/valid_unseen_memex.jsonl" \
      "fourteenth=..."   # one row per LABEL=FILE of episode records
"""

from __future__ import annotations

import sys
from typing import Any, Iterable, Iterator, Mapping

from memex_jax.agent import parse_turn, tool_response_body
from memex_jax.agent.records import read_records
from memex_jax.demos.alfworld import read_walkthrough
from memex_jax.demos.alfworld_text import (FETCH, NEXT_LOOKUP, REFUSED, STEP_LOOKUP,
                                           WRITTEN_ORDER, WRITTEN_PLAN, abstract,
                                           compile_walkthrough, plan_of, seen_items,
                                           segment_decisions)
from memex_jax.demos.errors import DemonstrationError
from memex_jax.envs.alfworld.env import LISTING

COUNTS = ("absent_no", "absent_take", "present_take", "present_no", "restated", "restated_exact")


def tally(decided: Iterable[tuple[bool, bool, bool]]) -> dict[str, int]:
  """COUNTS of (the place held the kind, the decision takes, the list restated exactly) triples:
  absent_no / absent_take at places without the kind, present_take / present_no at places
  holding it; restated / restated_exact: the decisions, and those whose list was exact."""
  counts = dict.fromkeys(COUNTS, 0)
  for present, takes, exact in decided:
    counts[f"{'present' if present else 'absent'}_{'take' if takes else 'no'}"] += 1
    counts["restated"] += 1
    counts["restated_exact"] += exact
  return counts


def count_decisions(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
  """`tally` of the decisions right after an observation that listed a searched place's
  contents, in episode records (`agent.trajectory_record`'s form: segments as lists of {role,
  content}); restated exactly: the observation's list, word for word."""
  return tally((d.present, d.takes, d.restated_exactly) for record in records
               for messages in record["segments"] for d in segment_decisions(messages))


def _commands(messages: Iterable[Mapping[str, str]]) -> Iterator[str | None]:
  """The `execute` commands of a segment's assistant turns, with None for the other turns."""
  for message in messages:
    call = parse_turn(message["content"]).call if message["role"] == "assistant" else None
    command = call.arguments.get("command") if call and call.name == "execute" else None
    yield command if isinstance(command, str) else None


def count_returns(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
  """go_tos: the `go to` calls of episode records; returns: those to a place the episode had
  gone to before. The expert returns only to fetch a thing seen there or to bring one back."""
  go_tos = returns = 0
  for record in records:
    places = set()
    for messages in record["segments"]:
      for command in _commands(messages):
        if command and command.startswith("go to "):
          go_tos += 1
          returns += command in places
          places.add(command)
  return {"go_tos": go_tos, "returns": returns}


def count_orders(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
  """orders: the search orders the assistant turns of episode records write; repeating: those
  naming a place twice; invented: those naming a place the room's listing does not."""
  orders = repeating = invented = 0
  for record in records:
    room = None  # The receptacles of the first listing the episode shows.
    for messages in record["segments"]:
      for message in messages:
        text = message["content"]
        if message["role"] != "assistant":
          if room is None and LISTING in text:
            room = set(seen_items(text[text.index(LISTING):]))
          continue
        for order in WRITTEN_ORDER.finditer(text):
          places = order[2].split(" > ")
          orders += 1
          repeating += len(set(places)) < len(places)
          invented += room is not None and not set(places) <= room
  return {"orders": orders, "repeating": repeating, "invented": invented}


def count_lookups(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
  """lookups: the "Next: A > B." of the assistant turns of episode records; shown: those whose
  pair "A > B" an earlier message of the segment shows; to_itself: those with B the same as A,
  a go to the place the search is at (the engine refuses it)."""
  lookups = shown = to_itself = 0
  for record in records:
    for messages in record["segments"]:
      for at, message in enumerate(messages):
        if message["role"] != "assistant":
          continue
        for lookup in NEXT_LOOKUP.finditer(message["content"]):
          lookups += 1
          to_itself += lookup[1] == lookup[2]
          pair = f"{lookup[1]} > {lookup[2]}"
          shown += any(pair in m["content"] for m in messages[:at])
  return {"lookups": lookups, "shown": shown, "to_itself": to_itself}


def _played(record: Mapping[str, Any]) -> list[tuple[str, str]]:
  """(command, the engine's reply: "" for a last command without one) of an episode record's
  `execute` calls, over its segments."""
  played = []
  for messages in record["segments"]:
    replies = [tool_response_body(m["content"]) or "" for m in messages[1:]] + [""]
    played += [(command, reply) for command, reply in zip(_commands(messages), replies)
               if command]
  return played


def count_refusals(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
  """refused: the commands of episode records the engine answered "Nothing happens."; followed:
  those another command came after; repeated: those whose next command was the same."""
  refused = followed = repeated = 0
  for record in records:
    played = _played(record)
    for (command, reply), (after, _) in zip(played, played[1:] + [(None, "")]):
      was_refused = reply.startswith(REFUSED)
      refused += was_refused
      followed += was_refused and after is not None
      repeated += was_refused and after == command
  return {"refused": refused, "followed": followed, "repeated": repeated}


def count_takes(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
  """takes: the `take` commands of episode records the engine answered (an episode's last
  command, cut by its end, got no answer); refused: those it refused; elsewhere: refused ones
  whose "from" is not the place the episode's last go reached (any place, before its first go),
  a take a policy can tell is wrong without knowing the place."""
  takes = refused = elsewhere = 0
  for record in records:
    at = None  # Where the last go that the engine did not refuse arrived.
    for command, reply in _played(record):
      if command.startswith("go to ") and reply and not reply.startswith(REFUSED):
        at = command.removeprefix("go to ")
      elif command.startswith("take ") and reply:
        takes += 1
        if reply.startswith(REFUSED):
          refused += 1
          elsewhere += command.rpartition(" from ")[2] != at
  return {"takes": takes, "take_refused": refused, "take_elsewhere": elsewhere}


def expert_plan(record: Mapping[str, Any]) -> list[str] | None:
  """The plan the expert writes for the record's game; None without a readable game file."""
  try:
    return plan_of(compile_walkthrough(read_walkthrough(record["game"])))
  except (KeyError, OSError, ValueError, DemonstrationError):
    return None


def count_plans(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
  """episodes; planned: those whose assistant turns write a plan ("Task plan: A > B > ...", the
  first one counts); checked: planned ones whose game file is readable; right: those of them
  whose plan is the one the expert writes for the game; steps: the "Step: A > B." lookups of
  the planned episodes; in_plan: those with A > B consecutive in the episode's plan; done: of
  the lookups of a step that is a command, not a fetch, those whose call is that command."""
  counts = dict.fromkeys(("episodes", "planned", "checked", "right", "steps", "in_plan",
                          "command_steps", "done"), 0)
  for record in records:
    counts["episodes"] += 1
    turns = [m["content"] for messages in record["segments"] for m in messages
             if m["role"] == "assistant"]
    written = next((p[1] for p in map(WRITTEN_PLAN.search, turns) if p), None)
    if written is None:
      continue
    counts["planned"] += 1
    game_plan = expert_plan(record)
    counts["checked"] += game_plan is not None
    counts["right"] += game_plan is not None and written.split(" > ") == game_plan
    for text in turns:
      lookups = STEP_LOOKUP.findall(text)
      counts["steps"] += len(lookups)
      counts["in_plan"] += sum(f" > {a} > {b} > " in f" > {written} > " for a, b in lookups)
      commanded = [b for _, b in lookups if not b.startswith(FETCH)]
      if commanded:
        call = parse_turn(text).call
        command = call.arguments.get("command") if call and call.name == "execute" else None
        counts["command_steps"] += len(commanded)
        counts["done"] += sum(isinstance(command, str) and abstract(command) == b
                              for b in commanded)
  return counts


def markdown_table(rows: Mapping[str, Mapping[str, int]]) -> str:
  """One row per label: the decisions at places without the kind and with it, and the lists."""
  lines = ["| policy | places without the kind: search on / take | places with it: take / search "
           "on | restated exactly |", "|---|---|---|---|"]
  for label, c in rows.items():
    lines.append(f"| {label} | {c['absent_no']} / {c['absent_take']} | {c['present_take']} / "
                 f"{c['present_no']} | {c['restated_exact']} of {c['restated']} |")
  return "\n".join(lines)


def main(argv: list[str]) -> int:
  if not argv or any(arg.startswith("-") for arg in argv):
    print(__doc__, file=sys.stderr)
    return 2
  rows, counts = {}, {}
  for arg in argv:
    label, _, path = arg.rpartition("=")
    records, label = list(read_records(path)), label or path
    rows[label] = count_decisions(records)
    counts[label] = {**count_returns(records), **count_orders(records), **count_lookups(records),
                     **count_refusals(records), **count_takes(records), **count_plans(records)}
  print(markdown_table(rows))
  for label, c in counts.items():
    print(f"{label}: {c['returns']} of {c['go_tos']} go-tos return to a place gone to before")
    print(f"{label}: {c['repeating']} of {c['orders']} written search orders name a place twice, "
          f"{c['invented']} name one the room does not have")
    print(f"{label}: {c['shown']} of {c['lookups']} next-place lookups name a pair the context "
          f"shows, {c['to_itself']} name the place the search is at")
    print(f"{label}: {c['repeated']} of {c['followed']} refused commands followed by another "
          f"were repeated at once ({c['refused']} refused)")
    print(f"{label}: {c['take_refused']} of {c['takes']} takes refused, {c['take_elsewhere']} of "
          "them from a place other than the one the last go reached")
    print(f"{label}: {c['planned']} of {c['episodes']} episodes write a plan, {c['right']} of the "
          f"{c['checked']} checked against their game the expert's; {c['in_plan']} of "
          f"{c['steps']} step lookups name consecutive steps of it, {c['done']} of "
          f"{c['command_steps']} command steps are then done")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
