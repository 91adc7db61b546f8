"""The expert's text helpers: the listing's anchors."""

from memex_jax.demos.alfworld_text import listing_anchors
from memex_jax.envs.alfworld.env import LISTING
from memex_jax.memory import extract_span

_LISTING = f"{LISTING} a bed 1, a desk 2, a drawer 1, and a shelf 1."


def _working(listing: str) -> str:
  return ("<tool_response>\n" + listing + "\n</tool_response>\n"
          "Holding: nothing. I go to desk 2.\n<tool_response>\nOn the desk 2, you see a pen 1, "
          "and a laptop 1.\n</tool_response>")


def test_listing_anchors_name_no_id_past_the_first_and_select_the_listing_exactly():
  working = _working(_LISTING)
  anchors = listing_anchors(working, _LISTING)
  assert anchors == {"start_anchor": LISTING, "mid_anchor": "bed 1", "end_anchor": "."}
  assert extract_span(working, *anchors.values()) == _LISTING


def test_listing_anchors_refuse_what_they_cannot_select():
  short = f"{LISTING} a bed 1."
  assert listing_anchors(_working(short), short) is None  # one receptacle: no mid anchor
  twice = _working(_LISTING) + "\n" + _LISTING
  assert listing_anchors(twice, _LISTING) is None  # the start is not unique
