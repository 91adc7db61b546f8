"""ContextStatus: the deterministic line appended after every observation, with warnings."""

from __future__ import annotations

import dataclasses
import re

from memex_jax.memory.accounting import ContextUsage
from memex_jax.memory.store import INDEX_PATTERN

_LINE = re.compile(r"\[Context Status: working=(\d+), total=(\d+), threshold=(\d+)\]")
# The warning line right after a status line, if it offers an index.
_OFFER = re.compile(rf"\n\[Warning:[^\]\n]*\(free index: ({INDEX_PATTERN.pattern})\)")


@dataclasses.dataclass(frozen=True)
class ContextStatus:
  """What the agent is told about its context before each turn.

  Attributes:
    usage: token counts of the context the status describes (the status line itself excluded).
    threshold: the working-context budget tau.
    warn_fraction: warn once the working context reaches this fraction of `threshold`.
    free_index: an unused index that the over-threshold warning offers ("": none; only an
      over-threshold status shows it), so that a policy archives under it instead of counting
      its blocks.
  """

  usage: ContextUsage
  threshold: int
  warn_fraction: float = 0.8
  free_index: str = ""

  @property
  def over(self) -> bool:
    return self.usage.working > self.threshold

  @property
  def approaching(self) -> bool:
    return not self.over and self.usage.working >= self.warn_fraction * self.threshold

  def render(self) -> str:
    line = (f"[Context Status: working={self.usage.working}, total={self.usage.total}, "
            f"threshold={self.threshold}]")
    if self.over:
      offer = f" (free index: {self.free_index})" if self.free_index else ""
      line += ("\n[Warning: working > threshold. Call CompressExperience now: archive what you "
               f"will need under new indices{offer} and keep a short summary.]")
    elif self.approaching:
      percent = round(100 * self.usage.working / self.threshold)
      line += (f"\n[Warning: working context is at {percent}% of the threshold. Plan a "
               "CompressExperience soon.]")
    return line


def parse_status(text: str) -> ContextStatus | None:
  """The status of the last `ContextStatus.render` line in `text`, or None.

  Scripted policies see their context as text; the last line is the one the loop just appended.
  The line does not carry `warn_fraction`: the parsed status has the default.
  """
  lines = list(_LINE.finditer(text))
  if not lines:
    return None
  working, total, threshold = (int(n) for n in lines[-1].groups())
  offered = _OFFER.match(text, lines[-1].end())
  return ContextStatus(ContextUsage(fixed=total - working, working=working), threshold,
                       free_index=offered.group(1) if offered else "")
