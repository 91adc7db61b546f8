"""Anchor-based extraction: archive a verbatim span of the working context named by 3 anchors."""

from __future__ import annotations

from typing import Any


class AnchorError(ValueError):
  """The anchors do not name exactly one span; the message says which anchor failed and why."""


def _first_two(text: str, needle: str) -> list[int]:
  """Start offsets of the first two (possibly overlapping) occurrences of `needle` in `text`.

  Two are enough to tell unique from not, and the cost stays linear in `text` whatever the
  anchor (one matching every character included).
  """
  first = text.find(needle)
  second = text.find(needle, first + 1) if first != -1 else -1
  return [at for at in (first, second) if at != -1]


def _check_anchor(name: str, anchor: Any) -> str:
  if not isinstance(anchor, str) or not anchor:
    raise AnchorError(f"{name} must be a non-empty string, got {anchor!r}")
  return anchor


def extract_span(text: str, start_anchor: Any, mid_anchor: Any, end_anchor: Any) -> str:
  """The span of `text` from `start_anchor` through `end_anchor`, verbatim.

  `start_anchor` must occur exactly once; the span ends at the first `end_anchor` after it;
  `mid_anchor` must occur strictly between the two (it guards against a wrong end match).

  Args:
    text: the decoded working context the anchors were copied from.
    start_anchor: text the span starts with.
    mid_anchor: text that must lie inside the span.
    end_anchor: text the span ends with.

  Returns:
    The archived span, including both end anchors.

  Raises:
    AnchorError: an anchor is empty, not found, not unique, or the mid anchor lies outside.
  """
  start_anchor = _check_anchor("start_anchor", start_anchor)
  mid_anchor = _check_anchor("mid_anchor", mid_anchor)
  end_anchor = _check_anchor("end_anchor", end_anchor)
  starts = _first_two(text, start_anchor)
  if not starts:
    raise AnchorError(f"start_anchor {start_anchor!r} was not found in the working context")
  if len(starts) > 1:
    raise AnchorError(
        f"start_anchor {start_anchor!r} is not unique: it occurs more than once in the working "
        f"context (at characters {starts[0]} and {starts[1]}); use a longer anchor")
  after_start = starts[0] + len(start_anchor)
  end_at = text.find(end_anchor, after_start)
  if end_at == -1:
    raise AnchorError(f"end_anchor {end_anchor!r} was not found after start_anchor "
                      f"{start_anchor!r}")
  if text.find(mid_anchor, after_start, end_at) == -1:
    raise AnchorError(
        f"mid_anchor {mid_anchor!r} does not lie between start_anchor {start_anchor!r} and "
        f"end_anchor {end_anchor!r} (a span of {end_at + len(end_anchor) - starts[0]} "
        "characters)")
  return text[starts[0]:end_at + len(end_anchor)]
