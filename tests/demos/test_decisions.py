"""The decision count, on the expert's own demonstrations: right every time, except the refused
takes it plays on purpose."""

import dataclasses

from memex_jax import demos
from memex_jax.agent import parse_turn, tool_response_body
from memex_jax.agent.records import trajectory_record, write_records
from memex_jax.demos import decisions
from memex_jax.envs.alfworld import games


def _records(small_root, renderer, config, env):
  return [trajectory_record(demos.make_demonstration(game, renderer, config, 0, env))
          for game in games.find_games(small_root, "valid_seen")]


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
    small_root, renderer, demonstration_config, demonstration_env, tmp_path):
  right = decisions.count_decisions(
      _records(small_root, renderer, demonstration_config, demonstration_env))
  assert right["absent_no"] > 0 and right["present_take"] > 0
  assert right["absent_take"] == right["present_no"] == 0
  assert right["restated_exact"] == right["restated"] == (
      right["absent_no"] + right["present_take"])

  config = dataclasses.replace(demonstration_config, wrong_take_rate=0.9)
  records = _records(small_root, renderer, config, demonstration_env)
  slipped = decisions.count_decisions(records)
  assert slipped["absent_take"] == _refused_takes(records) >= 2
  assert slipped["present_no"] == 0

  path = tmp_path / "trajectories.jsonl"
  write_records(path, records)
  table = decisions.markdown_table({"expert": slipped})
  assert f"| expert | {slipped['absent_no']} / {slipped['absent_take']} |" in table
  assert decisions.main([f"expert={path}"]) == 0 and decisions.main([]) == 2
