"""Anchor extraction archives the exact span, or fails precisely."""

import pytest

from memex_jax.memory import AnchorError, extract_span

CONTEXT = ("You open drawer 2. In it you see a key 7 and a map 3.\n"
           "<tool_response>\nThe note reads: 'Vault code: QXR-4821. Burn after reading.'\n"
           "</tool_response>\nYou go east. The note reads nothing else. Burn after reading.")


def test_span_runs_from_start_through_first_end_after_it():
  span = extract_span(CONTEXT, "drawer 2", "key 7", "map 3.")
  assert span == "drawer 2. In it you see a key 7 and a map 3."
  start = CONTEXT.index("The note reads: '")
  end = CONTEXT.index("reading.'") + len("reading.'")
  assert extract_span(CONTEXT, "The note reads: '", "QXR", "reading.'") == CONTEXT[start:end]


def test_span_may_cross_message_boundaries_verbatim():
  span = extract_span(CONTEXT, "a map 3.", "<tool_response>", "Vault code")
  assert span == "a map 3.\n<tool_response>\nThe note reads: 'Vault code"


def test_start_anchor_must_be_unique():
  second = CONTEXT.index("The note reads", CONTEXT.index("The note reads") + 1)
  with pytest.raises(AnchorError, match=r"start_anchor 'The note reads' is not unique: it "
                     rf"occurs more than once .*\(at characters \d+ and {second}\)"):
    extract_span(CONTEXT, "The note reads", "code", "reading.")


def test_start_anchor_not_found():
  with pytest.raises(AnchorError, match=r"start_anchor 'drawer 9' was not found"):
    extract_span(CONTEXT, "drawer 9", "key", "map")


def test_end_anchor_must_follow_start():
  with pytest.raises(AnchorError, match=r"end_anchor 'drawer 2' was not found after"):
    extract_span(CONTEXT, "key 7", "map", "drawer 2")


def test_mid_anchor_outside_the_span_is_rejected():
  with pytest.raises(AnchorError, match=r"mid_anchor 'QXR' does not lie between"):
    extract_span(CONTEXT, "drawer 2", "QXR", "map 3.")
  with pytest.raises(AnchorError, match=r"mid_anchor 'drawer' does not lie between"):
    extract_span(CONTEXT, "drawer 2", "drawer", "map 3.")  # Inside an anchor is not inside.


@pytest.mark.parametrize("bad", ["", None, 3])
def test_empty_or_non_string_anchor_is_rejected(bad):
  with pytest.raises(AnchorError, match="mid_anchor must be a non-empty string"):
    extract_span(CONTEXT, "drawer 2", bad, "map 3.")
