"""The census of calls and replies, over records the real agent loop wrote (VaultEnv)."""

import json

from memex_jax.agent import AgentConfig, EpisodeSpec, ScriptedPolicy, census, records, run_episodes
from memex_jax.agent import show
from memex_jax.envs.toy import VaultEnv, VaultTask


def _call(name, **arguments):
  payload = json.dumps({"name": name, "arguments": arguments})
  return f"Next step.\n<tool_call>\n{payload}\n</tool_call>"


ARCHIVE = _call("CompressExperience", summary="Read the note.",
                db_blocks=[{"index": "vault_note", "description": "the note",
                            "db_content": "Vault code: see the note"}])
REARCHIVE = _call("CompressExperience", summary="Again.",
                  db_blocks=[{"index": "vault_note", "description": "the same index",
                              "db_content": "x"},
                             {"index": "other", "description": "anchors and content",
                              "db_content": "y", "start_anchor": "a", "mid_anchor": "b",
                              "end_anchor": "c"}])
SCRIPT = [_call("execute", command="read note"), _call("execute", command="go west"),
          _call("execute", command="dance"), "I am not sure what to do.", ARCHIVE, REARCHIVE,
          _call("ReadExperience", index="no_such_block"), _call("execute", command="dance"),
          _call("Finish", answer="done")]


def _records(renderer, threshold, scripts=(SCRIPT, SCRIPT[:3] + SCRIPT[-1:])):
  config = AgentConfig(threshold=threshold, max_turn_tokens=256, max_steps=20)
  trajectories = run_episodes(ScriptedPolicy(renderer, list(scripts)),
                              [EpisodeSpec(VaultEnv(), VaultTask(seed=1, corridor_length=3))
                               for _ in scripts], renderer, config)
  return json.loads(json.dumps([records.trajectory_record(t) for t in trajectories]))


def test_the_census_counts_each_call_its_errors_and_the_commonest_observations(renderer):
  found = census.take_census(_records(renderer, threshold=4000))
  assert found.episodes == 2 and found.won == 0 and sum(found.finish.values()) == 2
  assert found.calls == {"execute": 4 + 3, census.MALFORMED: 1, "CompressExperience": 2,
                         "ReadExperience": 1, "Finish": 2}
  # The accepted compression ended its segment (no reply in it); the second reused its index
  # and mixed content with anchors; the read named nothing archived.
  assert found.errors == {"CompressExperience": 1, "ReadExperience": 1}
  assert found.rejections == {
      "index … already exists in the experience store; indices are stable": 1,
      "give either db_content or all three of start_anchor, mid_anchor, end_anchor, not both": 1}
  assert found.observations.most_common(1)[0][1] == 3  # "dance", three times
  assert found.observations.most_common(1)[0][0].startswith("Unknown command 'dance'")
  assert sum(found.observations.values()) == 7
  assert sum(found.over_threshold.values()) == 0
  assert found.repeats == 1  # the second "dance", three turns after the first
  assert found.looping == 0  # one malformed turn, which says one thing once
  # By command word: every "dance" got the commonest reply, no other command did.
  dance = found.observations.most_common(1)[0][0]
  assert census.command_replies(found.commands, dance) == {"dance": (3, 3), "read": (2, 0),
                                                           "go": (2, 0)}
  assert found.as_dict()["commands"]["dance"] == {dance: 3}
  assert census.command_word({"command": "  take apple 1 from table 1"}) == "take"
  assert census.command_word({"code": 42}) == census.command_word({}) == ""


def test_malformed_turns_that_loop_on_a_phrase_are_counted(renderer):
  # The loop a greedy SmolLM2 fell into in an evaluation: a plan list extended past its end.
  looping = "Next: " + "go to the fridge, cool the pan with the fridge, " * 4
  found = census.take_census(_records(renderer, threshold=4000, scripts=[
      [looping, "I am not sure what to do.", _call("Finish", answer="done")]]))
  assert found.calls[census.MALFORMED] == 2 and found.looping == 1
  assert "1 malformed turns loop on a phrase" in census.render_census(found)
  assert census.loops("a b c d e f " * 4) and not census.loops("a b c d e f " * 3)
  assert not census.loops("")


def test_turns_over_the_threshold_are_counted_by_call(renderer):
  found = census.take_census(_records(renderer, threshold=1))
  # Every turn follows a status over a one-token threshold, the first segment's first turn too.
  assert found.over_threshold == found.calls


def test_show_prints_the_census(renderer, tmp_path, capsys):
  path = tmp_path / "episodes.jsonl"
  records.write_records(path, _records(renderer, threshold=4000))
  assert show.main([str(path), "--census"]) == 0
  out = capsys.readouterr().out
  assert out.startswith("2 episodes, 0 won; finished by ")
  assert "| CompressExperience | 2 | 1.00 | 1 | 0 |" in out
  assert "| dance | 3 | 3 |\n| read | 2 | 0 |" in out
  assert "- 3 x \"Unknown command 'dance'" in out
  assert "1 env calls repeated the episode's previous env call word for word." in out
  assert show.main([str(tmp_path / "missing.jsonl"), "--census"]) == 2
  assert "has no records" in capsys.readouterr().err
