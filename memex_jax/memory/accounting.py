"""Token accounting with the real tokenizer: counts, budgets and the context's usage."""

from __future__ import annotations

import dataclasses
from typing import Protocol, Sequence

TRUNCATION_MARK = " [...truncated]"


class TextTokenizer(Protocol):
  """The part of `memex_jax.tokenizers.Tokenizer` that memory and the agent loop use."""

  def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
    ...

  def decode(self, ids: Sequence[int]) -> str:
    ...

  def token_to_id(self, token: str) -> int | None:
    ...


def truncate_to_tokens(tokenizer: TextTokenizer, text: str, budget: int) -> tuple[str, bool]:
  """`text` cut to at most `budget` tokens (then marked), and whether it was cut."""
  if budget < 0:
    raise ValueError(f"token budget must be >= 0, got {budget}")
  ids = tokenizer.encode(text)
  if len(ids) <= budget:
    return text, False
  return tokenizer.decode(ids[:budget]).rstrip() + TRUNCATION_MARK, True


@dataclasses.dataclass(frozen=True)
class ContextUsage:
  """Token usage of a context window M = [system, task, working].

  Attributes:
    fixed: tokens of the system prompt and the task (never compressed).
    working: tokens after them: summary, turns, observations, read-back blocks.
  """

  fixed: int
  working: int

  @property
  def total(self) -> int:
    return self.fixed + self.working
