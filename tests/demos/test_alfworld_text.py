"""The expert's text helpers: the listing's anchors, the search decisions."""

from memex_jax.demos import alfworld_text
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


def test_a_turn_after_the_room_listing_read_back_is_no_search_decision():
  # A demonstration's turn after it read its archived room listing: it restates a place it
  # searched before compressing, which the listing (of receptacles) does not show.
  listing = ("<tool_response>\nLooking quickly around you, you see a cabinet 2, a cabinet 1, a "
             "countertop 1, and a sinkbasin 1.\n</tool_response>")
  turn = ("Holding: nothing. From room_listing: cabinet 1 has saltshaker 1, soapbottle 2: plate: "
          "none. Searching for a plate: cabinet 2 is next, as a cabinet often holds one.")
  shown = ("<tool_response>\nYou open the cabinet 1. The cabinet 1 is open. In it, you see a "
           "saltshaker 1, and a soapbottle 2.\n</tool_response>")
  segment = [{"role": "user", "content": listing}, {"role": "assistant", "content": turn},
             {"role": "user", "content": shown}, {"role": "assistant", "content": turn}]
  found = list(alfworld_text.segment_decisions(segment))
  assert [d.turn for d in found] == [3]
  assert found[0].restated_exactly and not found[0].present and not found[0].takes
