"""The system prompt: the tools, the call format, the objective and what is penalised."""

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


def build_system_prompt(tool_schemas: Sequence[dict[str, Any]], mode: str,
                        env_instructions: str = "") -> str:
  """The system message for one memory regime.

  Args:
    tool_schemas: every tool the agent may call (rendered into the message).
    mode: "memex", "summary_only" or "full_context".
    env_instructions: what the environment's tool does, if it needs more than its schema.
  """
  parts = ["You are an agent that solves a task by calling tools, one per turn.",
           env_instructions.strip(), "# Tools", tools_block(tool_schemas), _FORMAT]
  if mode == "memex":
    parts += ["# Memory", _MEMORY]
  elif mode == "summary_only":
    parts += ["# Memory", _SUMMARY_ONLY]
  parts += ["# Scoring", _SCORING]
  return "\n\n".join(part for part in parts if part)
