"""IndexedSummary sigma = (progress state s, index map {(index, description)})."""

from __future__ import annotations

import dataclasses

from memex_jax.memory.accounting import TextTokenizer, truncate_to_tokens
from memex_jax.memory.store import ExperienceStore


@dataclasses.dataclass(frozen=True)
class IndexedSummary:
  """The in-context state that replaces the working context after a compression.

  Attributes:
    state: compact, actionable progress state (verified facts, plan), already within budget.
    index_map: (index, description) of every block in the store, in archive order.
    truncated: whether `state` was cut to the token budget.
  """

  state: str
  index_map: tuple[tuple[str, str], ...]
  truncated: bool = False

  def render(self) -> str:
    lines = ["[Indexed Summary]", "Progress state:", self.state.strip() or "(empty)"]
    if self.index_map:
      lines.append("Index map (dereference with ReadExperience):")
      lines.extend(f"- {index}: {description}" for index, description in self.index_map)
    else:
      lines.append("Index map: (empty)")
    return "\n".join(lines)


def build_summary(tokenizer: TextTokenizer, state: str, store: ExperienceStore,
                  state_budget: int, description_budget: int) -> IndexedSummary:
  """An IndexedSummary of `state` and the store, each text cut to its token budget.

  Args:
    tokenizer: the policy's tokenizer (budgets are in its tokens).
    state: the progress state the agent wrote.
    store: the episode's store; every entry appears in the index map.
    state_budget: most tokens kept of `state` (300 in the paper's harder setting).
    description_budget: most tokens kept of each entry's description.
  """
  state, truncated = truncate_to_tokens(tokenizer, state, state_budget)
  index_map = tuple(
      (entry.index, truncate_to_tokens(tokenizer, entry.description, description_budget)[0])
      for entry in store.entries())
  return IndexedSummary(state, index_map, truncated)
