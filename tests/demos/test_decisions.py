"""The decision count, on the expert's own demonstrations: right every time, except the refused
takes it plays on purpose."""

import dataclasses

from memex_jax.agent import parse_turn, tool_response_body
from memex_jax.agent.records import trajectory_record, write_records
from memex_jax.demos import decisions
from memex_jax.demos.alfworld_text import FETCH, tool_call


def _records(played):
  return [trajectory_record(trajectory) for *_, trajectory in played]


def _refused_takes(records):
  refused = 0
  for record in records:
    for messages in record["segments"]:
      for turn, reply in zip(messages, messages[1:]):
        call = turn["role"] == "assistant" and parse_turn(turn["content"]).call
        refused += bool(call and call.name == "execute" and
                        call.arguments["command"].startswith("take ") and
                        (tool_response_body(reply["content"]) or "").startswith("Nothing happens"))
  return refused


def test_the_expert_decides_right_and_its_wrong_takes_are_counted_as_such(
    played, played_with_wrong_takes):
  right = decisions.count_decisions(_records(played))
  assert right["absent_no"] > 0 and right["present_take"] > 0
  assert right["absent_take"] == right["present_no"] == 0
  assert right["restated_exact"] == right["restated"] == (
      right["absent_no"] + right["present_take"])

  records = _records(played_with_wrong_takes)
  slipped = decisions.count_decisions(records)
  assert slipped["absent_take"] == _refused_takes(records) >= 2
  assert slipped["present_no"] == 0


def test_the_command_prints_one_row_per_labelled_file(played_with_wrong_takes, tmp_path, capsys):
  records = _records(played_with_wrong_takes)
  path = tmp_path / "trajectories.jsonl"
  write_records(path, records)
  c = decisions.count_decisions(records)
  r = decisions.count_returns(records)
  o = decisions.count_orders(records)
  n = decisions.count_lookups(records)
  f = decisions.count_refusals(records)
  t = decisions.count_takes(records)
  assert decisions.main([f"expert, wrong takes={path}"]) == 0
  assert capsys.readouterr().out.splitlines()[-7:] == [
      f"| expert, wrong takes | {c['absent_no']} / {c['absent_take']} | {c['present_take']} / "
      f"{c['present_no']} | {c['restated_exact']} of {c['restated']} |",
      f"expert, wrong takes: {r['returns']} of {r['go_tos']} go-tos return to a place gone to "
      "before",
      f"expert, wrong takes: 0 of {o['orders']} written search orders name a place twice, 0 name "
      "one the room does not have",
      f"expert, wrong takes: {n['lookups']} of {n['lookups']} next-place lookups name a pair the "
      "context shows, 0 name the place the search is at",
      f"expert, wrong takes: 0 of {f['refused']} refused commands followed by another were "
      f"repeated at once ({f['refused']} refused)",
      f"expert, wrong takes: {t['take_refused']} of {t['takes']} takes refused, 0 of them from a "
      "place other than the one the last go reached",
      f"expert, wrong takes: 0 of {len(records)} episodes write a plan, 0 of the 0 checked "
      "against their game the expert's; 0 of 0 step lookups name consecutive steps of it, 0 of 0 "
      "command steps are then done"]
  assert decisions.main([]) == 2
  assert "python -m memex_jax.demos.decisions" in capsys.readouterr().err


def _go(place):
  return {"role": "assistant",
          "content": tool_call("Next.", "execute", command=f"go to {place}")}


def test_returns_count_the_go_tos_to_a_place_gone_to_before(played):
  walked = {"segments": [[_go("fridge 1"), _go("countertop 2"), _go("fridge 1")],
                         [_go("countertop 2"), _go("cabinet 1"),
                          {"role": "assistant", "content": "go to fridge 1, no call"}]]}
  assert decisions.count_returns([walked]) == {"go_tos": 5, "returns": 2}
  expert = decisions.count_returns(_records(played))
  assert 0 < expert["returns"] < expert["go_tos"] // 2


def _order(places):
  return {"role": "assistant", "content": tool_call(
      f"Places to search for a fork, likeliest first: {' > '.join(places)}. I go to {places[0]} "
      "first.", "execute", command=f"go to {places[0]}")}


def test_orders_count_the_written_ones_naming_a_place_twice_or_one_not_in_the_room(played):
  room = {"role": "tool", "content": "Looking quickly around you, you see a drawer 2, a drawer 1, "
          "and a fridge 1."}
  wrote = {"segments": [[room, _order(["drawer 2", "drawer 1", "fridge 1"])],
                        [_order(["drawer 1", "drawer 1"]), _order(["fridge 1", "drawer 9"]),
                         _order(["drawer 9", "drawer 9"])]]}
  assert decisions.count_orders([wrote]) == {"orders": 4, "repeating": 2, "invented": 2}
  expert = decisions.count_orders(_records(played))
  assert expert["orders"] > 0 and expert["repeating"] == expert["invented"] == 0


def _turn(text, command):
  return {"role": "assistant", "content": tool_call(text, "execute", command=command)}


def _reply(text):
  return {"role": "user", "content": f"<tool_response>\n{text}\n</tool_response>"}


def test_lookups_count_the_pairs_the_context_shows_and_those_naming_where_it_is(
    played, played_with_wrong_nexts):
  order = _order(["drawer 2", "drawer 1", "fridge 1"])
  walked = {"segments": [[order, _turn("Next: drawer 2 > drawer 1.", "go to drawer 1"),
                          _turn("Next: drawer 1 > drawer 1.", "go to drawer 1"),
                          _turn("Next: drawer 1 > sink 1.", "go to sink 1")],
                         [_turn("Next: drawer 1 > fridge 1.", "go to fridge 1")]]}
  assert decisions.count_lookups([walked]) == {"lookups": 4, "shown": 1, "to_itself": 1}
  expert = decisions.count_lookups(_records(played))
  assert expert["lookups"] == expert["shown"] > 0 == expert["to_itself"]
  slipped = decisions.count_lookups(_records(played_with_wrong_nexts))
  assert slipped["to_itself"] >= 2
  assert slipped["shown"] == slipped["lookups"] - slipped["to_itself"]


def test_refusals_count_the_commands_repeated_at_once(played_with_wrong_nexts):
  refused, done = _reply("Nothing happens."), _reply("You arrive at sink 1.")
  looped = {"segments": [[_go("sink 1"), refused, _go("sink 1"), refused, _go("fridge 1"), done],
                         [_go("fridge 1"), refused, _go("fridge 1")]]}
  # Across the segments too; the last command, with no reply, still counts as one that followed.
  assert decisions.count_refusals([looped]) == {"refused": 3, "followed": 3, "repeated": 2}
  expert = decisions.count_refusals(_records(played_with_wrong_nexts))
  assert expert["refused"] == expert["followed"] >= 2 and expert["repeated"] == 0


def test_takes_count_the_refused_ones_from_a_place_the_last_go_did_not_reach(
    played_with_wrong_takes):
  took, refused = _reply("You pick up the egg 1 from the fridge 1."), _reply("Nothing happens.")
  arrived = _reply("You arrive at fridge 1.")
  walked = {"segments": [[_turn("Take.", "take egg 1 from sink 1"), refused,  # before any go
                          _go("fridge 1"), arrived, _go("sink 1"), refused,  # still at fridge 1
                          _turn("Take.", "take egg 1 from sink 1"), refused],
                         [_turn("Take.", "take egg 2 from fridge 1"), refused,
                          _turn("Take.", "take egg 1 from fridge 1"), took,
                          _turn("Take.", "take egg 3 from fridge 1")]]}  # cut: no reply
  assert decisions.count_takes([walked]) == {"takes": 4, "take_refused": 3, "take_elsewhere": 2}
  # The expert's wrong takes are all from the place it has just gone to.
  expert = decisions.count_takes(_records(played_with_wrong_takes))
  assert expert["take_refused"] >= 2 and expert["take_elsewhere"] == 0


def test_plans_count_the_expert_s_plan_for_the_game_and_the_lookups_in_it(
    play_small_games, demonstration_config, played):
  planned = play_small_games(dataclasses.replace(demonstration_config, plan_steps=True))
  records = [trajectory_record(trajectory, game=game) for game, trajectory in planned]
  expert = decisions.count_plans(records)
  assert (expert["episodes"] == expert["planned"] == expert["checked"] == expert["right"] ==
          len(records))
  assert expert["steps"] == expert["in_plan"] > 0
  assert expert["command_steps"] == expert["done"] > 0
  assert decisions.count_plans(_records(played))["planned"] == 0

  # A policy's plans and lookups, on a game whose plan has a command step ("go to the sinkbasin").
  game, steps = next((r["game"], plan) for r in records
                     if len(plan := decisions.expert_plan(r)) >= 3
                     and not all(s.startswith(FETCH) for s in plan))
  plan = " > ".join(steps)
  command = next(s for s in steps if not s.startswith(FETCH))
  wrong_plan = " > ".join(steps[:1] + steps[2:])
  policy = [
      {"game": game, "segments": [[_turn(f"Task plan: {plan}.", "look")],
                                  [_turn(f"Step: {steps[0]} > {steps[1]}.", "look"),
                                   _turn(f"Step: {steps[0]} > {steps[2]}.", "look")]]},
      {"game": game, "segments": [[_turn(f"Task plan: {wrong_plan}.", "look"),
                                   _turn(f"Step: {steps[0]} > {command}.", "inventory")]]},
      {"game": "/no/such/game", "segments": [[_turn(f"Task plan: {plan}.", "look")]]},
      {"game": game, "segments": [[_turn("I look around.", "look")]]}]
  counted = decisions.count_plans(policy)
  assert counted == {"episodes": 4, "planned": 3, "checked": 2, "right": 1, "steps": 3,
                     "in_plan": 1 + (f"{steps[0]} > {command}" in wrong_plan),
                     "command_steps": 1 + (not steps[1].startswith(FETCH)) +
                     (not steps[2].startswith(FETCH)), "done": 0}
