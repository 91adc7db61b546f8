"""The memory tools and Finish: JSON schemas and argument checking.

CompressExperience and ReadExperience run in-process (the agent loop applies the plan);
every rejected call names its problem precisely and leaves the context unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from memex_jax.memory.anchors import AnchorError, extract_span
from memex_jax.memory.store import ExperienceStore, index_error

COMPRESS = "CompressExperience"
READ = "ReadExperience"
FINISH = "Finish"
MEMORY_TOOLS = frozenset({COMPRESS, READ})
ANCHOR_KEYS = ("start_anchor", "mid_anchor", "end_anchor")


class ToolArgumentError(ValueError):
  """A tool call's arguments were rejected; the message is shown to the agent verbatim."""


def _schema(name: str, description: str, properties: dict[str, Any],
            required: list[str]) -> dict[str, Any]:
  return {"name": name, "description": description,
          "parameters": {"type": "object", "properties": properties, "required": required}}


def compress_schema(archive: bool = True) -> dict[str, Any]:
  """CompressExperience; with `archive=False` (summary-only regime) it takes no db_blocks."""
  summary = {"type": "string", "description":
             "Compact progress state: verified facts, what is done, the plan for what is next."}
  if not archive:
    return _schema(COMPRESS, "Replace the working context by your summary. Nothing is "
                   "archived: whatever the summary omits is lost.", {"summary": summary},
                   ["summary"])
  block = {"type": "object", "properties": {
      "index": {"type": "string", "description": "New stable key, [A-Za-z0-9_-]{1,64}."},
      "description": {"type": "string", "description": "What the block holds (index map)."},
      "db_content": {"type": "string", "description": "Content written by you."},
      "start_anchor": {"type": "string", "description": "Exact text the span starts with."},
      "mid_anchor": {"type": "string", "description": "Exact text inside the span."},
      "end_anchor": {"type": "string", "description": "Exact text the span ends with."},
  }, "required": ["index", "description"]}
  return _schema(
      COMPRESS, "Archive blocks under new indices, then replace the working context by an "
      "indexed summary. Each block gives either db_content, or start/mid/end anchors copied "
      "from the working context (the span is archived verbatim).",
      {"summary": summary, "db_blocks": {"type": "array", "items": block}}, ["summary"])


def read_schema() -> dict[str, Any]:
  return _schema(READ, "Bring back the block archived under an index.",
                 {"index": {"type": "string", "description": "An index from the index map."}},
                 ["index"])


def finish_schema() -> dict[str, Any]:
  return _schema(FINISH, "End the episode with your final answer.",
                 {"answer": {"type": "string", "description": "The final answer."}},
                 ["answer"])


def string_argument(arguments: Mapping[str, Any], key: str, tool: str) -> str:
  """`arguments[key]`, which must be a string."""
  value = arguments.get(key)
  if not isinstance(value, str):
    got = "missing" if key not in arguments else f"a {type(value).__name__}"
    raise ToolArgumentError(f"{tool} needs a string argument '{key}' (got {got})")
  return value


@dataclasses.dataclass(frozen=True)
class ArchiveBlock:
  """A validated block, ready to write.

  Attributes:
    index: its new, valid, unused index.
    description: descriptor shown in the index map.
    content: the text to archive.
    anchored: whether `content` was extracted by anchors (verbatim) or written explicitly.
  """

  index: str
  description: str
  content: str
  anchored: bool


@dataclasses.dataclass(frozen=True)
class CompressionPlan:
  """A CompressExperience call whose arguments all checked out.

  Attributes:
    state: the progress state (before truncation to the summary budget).
    blocks: blocks to archive, in call order.
    ignored_blocks: db_blocks dropped because the memory regime archives nothing.
  """

  state: str
  blocks: tuple[ArchiveBlock, ...]
  ignored_blocks: int = 0


def _plan_block(position: int, block: Any, working_text: str, store: ExperienceStore,
                seen: set[str]) -> ArchiveBlock:
  if not isinstance(block, Mapping):
    raise ToolArgumentError(f"db_blocks[{position}] must be an object, got "
                            f"{type(block).__name__}")
  index = block.get("index")
  problem = index_error(index)
  if problem is None and index in seen:
    problem = f"index {index!r} is used twice in this call"
  if problem is None and index in store:
    problem = f"index {index!r} already exists in the experience store; indices are stable"
  if problem is not None:
    raise ToolArgumentError(f"db_blocks[{position}]: {problem}")
  seen.add(index)
  description = block.get("description", "")
  if not isinstance(description, str):
    raise ToolArgumentError(f"db_blocks[{position}] ({index}): description must be a string")
  has_content = "db_content" in block
  anchors_given = [key for key in ANCHOR_KEYS if key in block]
  if has_content == bool(anchors_given):
    raise ToolArgumentError(
        f"db_blocks[{position}] ({index}): give either db_content or all three of "
        f"{', '.join(ANCHOR_KEYS)}, not {'both' if has_content else 'neither'}")
  if has_content:
    if not isinstance(block["db_content"], str):
      raise ToolArgumentError(f"db_blocks[{position}] ({index}): db_content must be a string")
    return ArchiveBlock(index, description, block["db_content"], anchored=False)
  try:
    span = extract_span(working_text, *(block.get(key) for key in ANCHOR_KEYS))
  except AnchorError as e:
    raise ToolArgumentError(f"db_blocks[{position}] ({index}): {e}") from None
  return ArchiveBlock(index, description, span, anchored=True)


def plan_compression(arguments: Mapping[str, Any], working_text: str, store: ExperienceStore,
                     archive: bool = True) -> CompressionPlan:
  """Checks a CompressExperience call; nothing is written until every block is valid.

  Args:
    arguments: the call's arguments.
    working_text: decoded working context without the current assistant turn (anchors are
      searched here).
    store: the episode's store (indices must be new).
    archive: False in the summary-only regime: blocks are dropped, not archived.

  Raises:
    ToolArgumentError: listing every rejected block, each with its position and index.
  """
  state = string_argument(arguments, "summary", COMPRESS)
  blocks = arguments.get("db_blocks", [])
  if not isinstance(blocks, list):
    raise ToolArgumentError(f"{COMPRESS}: db_blocks must be a list, got "
                            f"{type(blocks).__name__}")
  if not archive:
    return CompressionPlan(state, (), ignored_blocks=len(blocks))
  planned, problems, seen = [], [], set()
  for position, block in enumerate(blocks):
    try:
      planned.append(_plan_block(position, block, working_text, store, seen))
    except ToolArgumentError as e:
      problems.append(str(e))
  if problems:
    raise ToolArgumentError(f"{COMPRESS} rejected; the context is unchanged:\n- " +
                            "\n- ".join(problems))
  return CompressionPlan(state, tuple(planned))
