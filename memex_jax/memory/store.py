"""The external experience store D: index -> archived content, one per episode."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

INDEX_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")


class ExperienceStoreError(ValueError):
  """A write or read of the store was rejected; the message is shown to the agent verbatim."""


def index_error(index: Any) -> str | None:
  """Why `index` cannot name an entry of D, or None if it can."""
  if not isinstance(index, str):
    return f"index must be a string, got {type(index).__name__}"
  if not INDEX_PATTERN.fullmatch(index):
    return (f"index {index!r} is invalid: use 1-64 characters from letters, digits, '_' "
            "and '-'")
  return None


@dataclasses.dataclass(frozen=True)
class ExperienceEntry:
  """One archived block.

  Attributes:
    index: stable key under which the block was archived.
    content: the archived text, verbatim.
    description: the agent's short descriptor, shown in the index map.
    step: agent step at which the block was archived.
  """

  index: str
  content: str
  description: str
  step: int


class ExperienceStore:
  """Key-value store of archived experience; an index, once written, never changes."""

  def __init__(self) -> None:
    self._entries: dict[str, ExperienceEntry] = {}

  def __contains__(self, index: object) -> bool:
    return index in self._entries

  def __len__(self) -> int:
    return len(self._entries)

  def indices(self) -> list[str]:
    """All indices, in the order they were written."""
    return list(self._entries)

  def entries(self) -> list[ExperienceEntry]:
    return list(self._entries.values())

  def free_index(self, stem: str = "notes") -> str:
    """The first of `stem_1`, `stem_2`, ... that names no entry yet."""
    n = 1
    while f"{stem}_{n}" in self._entries:
      n += 1
    return f"{stem}_{n}"

  def write(self, index: str, content: str, description: str = "", step: int = -1) -> None:
    """Archives `content` under a new index; a bad or already used index is an error."""
    problem = index_error(index)
    if problem is not None:
      raise ExperienceStoreError(problem)
    if index in self._entries:
      raise ExperienceStoreError(
          f"index {index!r} already exists in the experience store; indices are stable, "
          "choose a new one")
    self._entries[index] = ExperienceEntry(index, content, description, step)

  def read(self, index: str) -> str:
    """The content archived under `index`; an unknown index names the available ones."""
    entry = self._entries.get(index) if isinstance(index, str) else None
    if entry is None:
      available = ", ".join(self._entries) or "(none: nothing has been archived yet)"
      raise ExperienceStoreError(f"unknown index {index!r}; available indices: {available}")
    return entry.content

  def export(self) -> dict[str, dict[str, Any]]:
    """The whole store as plain data (saved with the trajectory for auditing)."""
    return {e.index: {"content": e.content, "description": e.description, "step": e.step}
            for e in self._entries.values()}
