"""How a demonstration uses memory, read off its stored messages (any environment family)."""

from __future__ import annotations

from typing import Any, Callable

from memex_jax.agent import Trajectory, parse_turn, tool_response_body
from memex_jax.memory import COMPRESS, READ, parse_status
from memex_jax.rl.sample import trained_runs


def memory_stats(trajectory: Trajectory,
                 ids: Callable[[str], set[str]]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
  """(compressions, block kinds, reads and the reads that paid off, the longest turn;
  (command, observation) of every `execute` action in order).

  A read pays off when a later action of the same segment names an id (`ids` finds them in
  text: ALFWorld's objects, AppWorld's APIs) that the read brought back and the working context
  did not show before it.
  """
  stats = {"crossed_threshold": False, "anchor_blocks": 0, "explicit_blocks": 0,
           "reads": 0, "reads_used": 0, "longest_turn": 0}
  executed = []
  for segment in trajectory.segments:
    stats["longest_turn"] = max([stats["longest_turn"]] +
                                [len(run) for run in trained_runs(segment.sample.loss_mask)])
    working = list(segment.messages[2:])
    seen, supplied = "", []
    for position, message in enumerate(working):
      status = parse_status(message.content)
      stats["crossed_threshold"] |= bool(status and status.over)
      call = parse_turn(message.content).call if message.role == "assistant" else None
      if call and call.name == COMPRESS:
        for block in call.arguments.get("db_blocks", []):
          stats["explicit_blocks" if "db_content" in block else "anchor_blocks"] += 1
      elif call and call.name == READ and position + 1 < len(working):
        stats["reads"] += 1
        response = tool_response_body(working[position + 1].content)
        supplied.append(ids(response or "") - ids(seen))
      elif call:
        if call.name == "execute" and position + 1 < len(working):
          executed.append((str(call.arguments.get("command", "")),
                           tool_response_body(working[position + 1].content) or ""))
        used = ids(str(call.arguments.get("command", "")))
        stats["reads_used"] += sum(bool(s & used) for s in supplied)
        supplied = [s for s in supplied if not s & used]
      seen += message.content
  return stats, executed
