"""The system prompt: the tools, the call format, the objective and what is penalised.

Two styles say the same rules: "full" lists the tools as JSON schemas (the paper's form);
"compact" lists them as one-line signatures in about a third of the tokens, for CPU runs where
the system prompt is re-read in every trained segment.
"""

from __future__ import annotations

from typing import Any, Sequence

from memex_jax.agent.chat import tools_block
from memex_jax.memory.tools import COMPRESS, READ

_FORMAT = """\
Each turn, think briefly, then call exactly one tool:
<tool_call>
{"name": "<tool name>", "arguments": {<arguments as a JSON object>}}
</tool_call>
The tool's result comes back inside <tool_response>. A turn without a valid call is wasted."""

_MEMORY = f"""\
Your context window is limited. After each observation you see a line
[Context Status: working=W, total=T, threshold=L]
where W counts the tokens after this message and the task, and L is your budget for them.
Before W passes L, call {COMPRESS}: archive the evidence you may need later (exact ids,
codes, outputs, notes) into db_blocks under new, descriptive indices, then write a short
progress state. The working context is replaced by that state plus an index map of everything
archived; this message and the task stay. A block either holds text you write (db_content) or
copies a span of the working context verbatim: give a start_anchor, a mid_anchor and an
end_anchor copied exactly from it, the start unique, the mid between the two. Indices are
permanent; reuse none. Call {READ} with an index to bring a block back whenever you need it,
instead of redoing the work that produced it."""

_SUMMARY_ONLY = f"""\
Your context window is limited. After each observation you see a line
[Context Status: working=W, total=T, threshold=L]
where W counts the tokens after this message and the task, and L is your budget for them.
Before W passes L, call {COMPRESS} with a summary: the working context is replaced by it and
anything it leaves out is gone."""

_SCORING = """\
You are scored on solving the task. Points are lost for a working context above the threshold,
for repeating a call whose result you already have while nothing has changed since, and for
turns without a well-formed tool call. Call Finish when you are done."""

# Line breaks as in the compact prompt that recorded demonstrations hold.
_COMPACT_MEMORY = (
    "Memory: each observation ends with [Context Status: working=W, total=T, threshold=L]. "
    f"Before W\npasses L, call {COMPRESS}: archive what you may need later (exact ids, findings) "
    "as db_blocks\nunder new indices, each with db_content you write or start/mid/end anchors "
    "copied exactly from\nthe context; your summary plus an index map of the blocks then replace "
    f"the working context.\nCall {READ} with an index to bring a block back instead of redoing "
    "its work.")

_COMPACT_SUMMARY_ONLY = (
    "Memory: each observation ends with [Context Status: working=W, total=T, threshold=L]. "
    f"Before W\npasses L, call {COMPRESS} with a summary: it replaces the working context; the "
    "rest is gone.")

_COMPACT_SCORING = (
    "Scoring: solve the task, then call Finish. Points are lost for a working context above the"
    "\nthreshold, for repeating a call whose result you already have, and for malformed turns.")

STYLES = ("full", "compact")


def _arguments(schema: dict[str, Any]) -> str:
  """An object schema's properties as `a, b?, c?: [{d, e?}]` (? = optional)."""
  required = set(schema.get("required", ()))
  parts = []
  for name, prop in schema.get("properties", {}).items():
    part = name if name in required else f"{name}?"
    items = prop.get("items", {})
    if prop.get("type") == "array" and items.get("type") == "object":
      part += f": [{{{_arguments(items)}}}]"
    parts.append(part)
  return ", ".join(parts)


def tool_signatures(schemas: Sequence[dict[str, Any]]) -> str:
  """One `- name(arguments): description` line per tool."""
  return "\n".join(f"- {s['name']}({_arguments(s['parameters'])}): {s['description']}"
                   for s in schemas)


def _compact(tool_schemas: Sequence[dict[str, Any]], mode: str, env_instructions: str) -> str:
  parts = ["You solve a task by calling one tool per turn.", env_instructions.strip(),
           "Tools (? marks an optional argument):\n" + tool_signatures(tool_schemas), _FORMAT,
           {"memex": _COMPACT_MEMORY, "summary_only": _COMPACT_SUMMARY_ONLY}.get(mode, ""),
           _COMPACT_SCORING]
  return "\n\n".join(part for part in parts if part)


def build_system_prompt(tool_schemas: Sequence[dict[str, Any]], mode: str,
                        env_instructions: str = "", style: str = "full") -> str:
  """The system message for one memory regime.

  Args:
    tool_schemas: every tool the agent may call (rendered into the message).
    mode: "memex", "summary_only" or "full_context".
    env_instructions: what the environment's tool does, if it needs more than its schema.
    style: "full" (tools as JSON schemas) or "compact" (one-line signatures, shorter rules).
  """
  if style not in STYLES:
    raise ValueError(f"prompt style must be one of {STYLES}, got {style!r}")
  if style == "compact":
    return _compact(tool_schemas, mode, env_instructions)
  parts = ["You are an agent that solves a task by calling tools, one per turn.",
           env_instructions.strip(), "# Tools", tools_block(tool_schemas), _FORMAT]
  if mode == "memex":
    parts += ["# Memory", _MEMORY]
  elif mode == "summary_only":
    parts += ["# Memory", _SUMMARY_ONLY]
  parts += ["# Scoring", _SCORING]
  return "\n\n".join(part for part in parts if part)
