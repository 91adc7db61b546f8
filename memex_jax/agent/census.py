"""What the episodes of a trajectories file did, turn by turn: a census of calls and replies.

Episode metrics say how an evaluation ended; the census says why, from the stored messages
alone, so any finished run can be read after the fact (`python -m memex_jax.agent.show FILE
--census`): how each call fared, why compressions were rejected, which observations came back
most often (an environment's refusals, such as ALFWorld's "Nothing happens."), which replies
each command word got (how many takes and moves were refused), and which calls the policy made
while its working context was over the threshold.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from typing import Any, Mapping, Sequence

from memex_jax.agent.chat import tool_response_body
from memex_jax.agent.parser import parse_turn
from memex_jax.memory import COMPRESS, parse_status

MALFORMED = "(malformed)"
_ERROR = "Error: "
# Quoted values and positions vary per call; what is left names the kind of problem.
_VARYING = re.compile(r"'[^']*'|\"[^\"]*\"|\[\d+\]|\([^()]*\)")
# A malformed turn loops when some run of LOOP_WORDS words comes back LOOP_TIMES times: greedy
# decoding caught in a cycle (a plan list extended until the turn's cap or the window ended it).
LOOP_WORDS, LOOP_TIMES = 6, 4


@dataclasses.dataclass
class Census:
  """Counts over every assistant turn of a set of episode records.

  Attributes:
    episodes: how many records.
    won: how many succeeded.
    finish: finish reason -> episodes.
    calls: tool name (or MALFORMED) -> turns.
    errors: tool name -> calls whose reply was an error.
    rejections: a compression's rejected block, its problem with indices and values blanked
      -> blocks.
    observations: the first line of an env tool's reply -> replies.
    commands: an env call's command word (`command_word`) -> the first line of its reply ->
      replies.
    over_threshold: tool name (or MALFORMED) -> turns taken while the last context status
      before them had the working context over the threshold.
    repeats: env tool calls whose arguments equal the episode's previous env call's (a
      policy stuck on a command, whatever the turns between).
    looping: malformed turns that loop on a phrase (`loops`).
  """

  episodes: int = 0
  won: int = 0
  finish: collections.Counter = dataclasses.field(default_factory=collections.Counter)
  calls: collections.Counter = dataclasses.field(default_factory=collections.Counter)
  errors: collections.Counter = dataclasses.field(default_factory=collections.Counter)
  rejections: collections.Counter = dataclasses.field(default_factory=collections.Counter)
  observations: collections.Counter = dataclasses.field(default_factory=collections.Counter)
  commands: dict[str, collections.Counter] = dataclasses.field(default_factory=dict)
  over_threshold: collections.Counter = dataclasses.field(default_factory=collections.Counter)
  repeats: int = 0
  looping: int = 0

  def as_dict(self) -> dict[str, Any]:
    """JSON-able: each counter as a dict, commonest first."""
    def plain(value):
      return (dict(value.most_common()) if isinstance(value, collections.Counter) else
              {k: plain(v) for k, v in value.items()} if isinstance(value, dict) else value)
    return {field.name: plain(getattr(self, field.name)) for field in dataclasses.fields(self)}


def command_replies(commands: Mapping[str, Mapping[str, int]],
                    reply: str) -> dict[str, tuple[int, int]]:
  """Command word -> (calls with a reply, of them those whose reply was `reply`), most called
  first, from `Census.commands` or its `as_dict` form."""
  return {word: (sum(replies.values()), replies.get(reply, 0)) for word, replies in sorted(
      commands.items(), key=lambda item: -sum(item[1].values()))}


def command_word(arguments: Mapping[str, Any]) -> str:
  """The leading word of an env call's first argument ('take' of 'take apple 1 from table 1'),
  or '' when it has none."""
  first = next(iter(arguments.values()), "")
  word = re.match(r"[A-Za-z_]+", first.strip()) if isinstance(first, str) else None
  return word.group().lower() if word else ""


def loops(text: str) -> bool:
  """Whether some run of LOOP_WORDS words occurs LOOP_TIMES or more times in `text`."""
  words = text.split()
  runs = collections.Counter(tuple(words[i:i + LOOP_WORDS])
                             for i in range(len(words) - LOOP_WORDS + 1))
  return bool(runs) and runs.most_common(1)[0][1] >= LOOP_TIMES


def _reply_text(content: str) -> str:
  return (tool_response_body(content) or content).strip()


def _rejection_kinds(reply: str) -> list[str]:
  """One problem per rejected block (the '- ' lines), or the whole error when it has none."""
  lines = [line[2:] for line in reply.splitlines() if line.startswith("- ")]
  problems = lines or [reply[len(_ERROR):]]
  return [_VARYING.sub("…", problem.split(": ", 1)[-1] if lines else problem).strip()
          for problem in problems]


def _count_segment(census: Census, messages: Sequence[Mapping[str, str]], env_tool: str,
                   previous: Any) -> Any:
  """Counts one segment's turns; `previous` is the arguments of the episode's last env call
  before it, and the segment's last is returned."""
  over = False
  for position, message in enumerate(messages):
    if message["role"] != "assistant":
      status = parse_status(message["content"])
      over = status.over if status else over
      continue
    call = parse_turn(message["content"]).call
    name = call.name if call else MALFORMED
    census.calls[name] += 1
    census.over_threshold[name] += over
    census.looping += call is None and loops(message["content"])
    if name == env_tool:
      census.repeats += call.arguments == previous
      previous = call.arguments
    if call is None or position + 1 == len(messages):
      continue  # no reply here: an accepted compression ended the segment, or the episode ended
    reply = _reply_text(messages[position + 1]["content"])
    if reply.startswith(_ERROR):
      census.errors[name] += 1
      if name == COMPRESS:
        census.rejections.update(_rejection_kinds(reply))
    elif name == env_tool:
      first_line = reply.splitlines()[0] if reply else ""
      census.observations[first_line] += 1
      census.commands.setdefault(command_word(call.arguments),
                                 collections.Counter())[first_line] += 1
  return previous


def take_census(records: Sequence[Mapping[str, Any]], env_tool: str = "execute") -> Census:
  """The census of `records` (as `records.read_records` returns them); `env_tool` is the
  environment's tool (`AgentConfig.env_tool`)."""
  out = Census()
  for record in records:
    out.episodes += 1
    out.won += bool(record["metrics"]["success"])
    out.finish[record["metrics"]["finish_reason"]] += 1
    previous = None
    for segment in record["segments"]:
      previous = _count_segment(out, segment, env_tool, previous)
  return out


def _clip(text: str, width: int = 100) -> str:
  return text if len(text) <= width else text[:width - 1] + "…"


def render_census(c: Census, top: int = 5) -> str:
  """The census as Markdown: outcomes, a table of calls, then the `top` commonest rejection
  problems and observations."""
  turns = sum(c.calls.values())
  lines = [f"{c.episodes} episodes, {c.won} won; finished by "
           + ", ".join(f"{reason} {n}" for reason, n in c.finish.most_common()), "",
           "| call | turns | per episode | error replies | taken over the threshold |",
           "|---|---:|---:|---:|---:|"]
  for name, n in c.calls.most_common():
    lines.append(f"| {name} | {n} | {n / max(c.episodes, 1):.2f} | {c.errors[name]} | "
                 f"{c.over_threshold[name]} |")
  lines.append(f"| all | {turns} | {turns / max(c.episodes, 1):.2f} | "
               f"{sum(c.errors.values())} | {sum(c.over_threshold.values())} |")
  lines += ["", f"{c.repeats} env calls repeated the episode's previous env call word for word."]
  if c.looping:
    lines.append(f"{c.looping} malformed turns loop on a phrase (a run of {LOOP_WORDS} words "
                 f"{LOOP_TIMES} or more times): decoding caught in a cycle before the call closed.")
  if c.rejections:
    lines += ["", f"Rejected {COMPRESS} blocks, by problem:"]
    lines += [f"- {n} x {kind}" for kind, n in c.rejections.most_common(top)]
  if c.observations:
    lines += ["", f"Commonest observations ({sum(c.observations.values())} in all):"]
    lines += [f"- {n} x {_clip(text)!r}" for text, n in c.observations.most_common(top)]
    commonest = c.observations.most_common(1)[0][0]
    lines += ["", "Env calls by command word, and how many got the commonest observation "
              f"({_clip(commonest, 40)!r}):", "", "| command | calls | that reply |",
              "|---|---:|---:|"]
    lines += [f"| {word or '(none)'} | {calls} | {same} |"
              for word, (calls, same) in command_replies(c.commands, commonest).items()]
  return "\n".join(lines) + "\n"
