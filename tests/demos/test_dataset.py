"""The demonstration dataset: written by the CLI, read back for SFT, replayed through the loop."""

import contextlib
import io
import json
import os
import re

import numpy as np
import pytest

from memex_jax.agent import (EpisodeSpec, ScriptedPolicy, build_system_prompt, parse_turn,
                             run_episodes)
from memex_jax.demos import dataset as dataset_lib
from memex_jax import demos
from memex_jax.agent import show
from memex_jax.agent.presets import smollm2_alfworld
from memex_jax.envs.alfworld.env import LISTING
from memex_jax.memory import parse_status

NUM = 4
THRESHOLD = 512


@pytest.fixture(scope="session")
def demonstration_config(search_prior):
  """The expert finds things soon in small scenes: a lower threshold has most of them cross it."""
  return demos.DemonstrationConfig(agent=smollm2_alfworld(threshold=THRESHOLD), prior=search_prior)


@pytest.fixture(scope="module")
def dataset(small_root, demonstration_config, tmp_path_factory):
  """The CLI's output over the small scenes (2 worker processes), and what it printed."""
  out = str(tmp_path_factory.mktemp("demos"))
  prior = str(tmp_path_factory.mktemp("prior") / "search_prior.json")
  demonstration_config.prior.save(prior)
  argv = ["--games", small_root, "--split", "valid_seen", "--out", out, "--num", str(NUM),
          "--seed", "3", "--workers", "2", "--shards", "2", "--prior", prior,
          "--threshold", str(demonstration_config.agent.threshold)]
  printed = io.StringIO()
  with contextlib.redirect_stdout(printed):
    dataset_lib.main(argv)
  with open(os.path.join(out, dataset_lib.TRAJECTORIES)) as f:
    trajectories = [json.loads(line) for line in f]
  segments = {}
  for name in sorted(os.listdir(out)):
    if name.startswith(dataset_lib.SEGMENTS_PREFIX):
      with open(os.path.join(out, name)) as f:
        for line in f:
          record = json.loads(line)
          segments.setdefault(record["demo"], []).append(record)
  return out, printed.getvalue(), trajectories, segments


def test_cli_writes_shards_trajectories_and_a_summary(dataset, small_root, renderer,
                                                      demonstration_config):
  out, printed, trajectories, segments = dataset
  with open(os.path.join(out, dataset_lib.SUMMARY)) as f:
    summary = json.load(f)
  assert summary["demonstrations"] == NUM and summary["failed"] == 0
  assert summary["agent"]["threshold"] == demonstration_config.agent.threshold
  assert dataset_lib.search_prior.SearchPrior.load(
      os.path.join(out, dataset_lib.SEARCH_PRIOR)) == demonstration_config.prior
  assert re.search(r"\d+% of the demonstrations cross the compression threshold; \d+% need a "
                   r"ReadExperience whose content a later action uses", printed)
  assert sorted(f for f in os.listdir(out) if f.startswith(dataset_lib.SEGMENTS_PREFIX)) == [
      "segments-00000-of-00002.jsonl", "segments-00001-of-00002.jsonl"]
  assert [t["demo"] for t in trajectories] == list(range(NUM))
  assert len(set(t["game"] for t in trajectories)) > 1
  assert all(os.path.isdir(os.path.join(small_root, t["game"])) for t in trajectories)
  assert summary["segments"] == sum(len(s) for s in segments.values())
  examples = list(dataset_lib.iter_sft_examples(out))
  assert len(examples) == summary["segments"]
  assert summary["tokens"] == sum(len(ids) for ids, _ in examples)
  for ids, mask in examples:
    assert ids.dtype == mask.dtype == np.int32 and ids.shape == mask.shape
    trained = renderer.tokenizer.decode(ids[mask == 1])
    assert "<tool_call>" in trained and "<tool_response>" not in trained
    assert len(ids) <= 8192


def test_compress_turns_can_weigh_more_in_the_sft_loss(dataset, renderer):
  out = dataset[0]
  plain = list(dataset_lib.iter_sft_examples(out))
  weighted = list(dataset_lib.iter_sft_examples(out, compress_weight=4))
  changed = 0
  for (ids, mask), (_, heavy) in zip(plain, weighted):
    if np.array_equal(mask, heavy):
      continue
    changed += 1
    np.testing.assert_array_equal(heavy > 0, mask > 0)  # the same tokens are trained
    assert set(np.unique(heavy).tolist()) == {0, 1, 4}
    turn = renderer.tokenizer.decode(ids[heavy == 4])
    assert '"name": "CompressExperience"' in turn and turn.count("<tool_call>") == 1
  # Every segment but an episode's last ends with a compression.
  assert changed == len(plain) - NUM
  with pytest.raises(ValueError, match="compress_weight=0"):
    next(dataset_lib.iter_sft_examples(out, compress_weight=0))


def test_weigh_last_turn_finds_the_last_run_of_trained_tokens():
  mask = np.array([0, 1, 1, 0, 0, 1, 1, 1, 0], np.int32)
  np.testing.assert_array_equal(dataset_lib.weigh_last_turn(mask, 3), [0, 1, 1, 0, 0, 3, 3, 3, 0])
  np.testing.assert_array_equal(dataset_lib.weigh_last_turn(np.zeros(3, np.int32), 3), [0, 0, 0])
  assert mask[5] == 1  # the input is not changed

def _replay(record_segments, game, renderer, config, env):
  script = [m["content"] for s in record_segments for m in s["messages"]
            if m["role"] == "assistant"]
  policy = ScriptedPolicy(renderer, [script])
  [trajectory] = run_episodes(policy, [EpisodeSpec(env, game)], renderer, config.agent)
  return trajectory


def _assert_over_threshold_only_right_after_a_read(trajectory):
  """Every turn taken over the threshold is a CompressExperience, or an execute whose previous
  turn was a ReadExperience (the expert acts on what it read before compressing)."""
  for segment in trajectory.segments:
    working = segment.messages[2:]
    calls = [parse_turn(m.content).call if m.role == "assistant" else None for m in working]
    for k, message in enumerate(working):
      status = parse_status(message.content) if message.role == "user" else None
      if status is None or not status.over or k + 1 == len(working):
        continue
      name = calls[k + 1].name
      before = next((c.name for c in reversed(calls[:k]) if c is not None), None)
      assert name == "CompressExperience" or (name == "execute" and before == "ReadExperience"), (
          name, before, message.content[-200:])


def test_replayed_demonstrations_win_cleanly_with_the_stored_ids(
    dataset, small_root, renderer, demonstration_config, demonstration_env):
  _, _, trajectories, segments = dataset
  # The two that compress most: the memory paths are the ones worth replaying.
  sample = sorted(trajectories, key=lambda t: -t["metrics"]["num_compress"])[:2]
  for record in sample:
    stored = sorted(segments[record["demo"]], key=lambda s: s["segment_index"])
    replay = _replay(stored, os.path.join(small_root, record["game"]), renderer,
                     demonstration_config, demonstration_env)
    m = replay.metrics
    assert m.success and m.finish_reason == "env_done", record["game"]
    assert m.num_malformed == 0 and (m.p_redundancy, m.p_format) == (0, 0)
    _assert_over_threshold_only_right_after_a_read(replay)
    assert m.p_context < 0.05  # paid only by those executes right after a read
    assert [s.token_ids.tolist() for s in replay.samples] == [s["token_ids"] for s in stored]
    assert [s.loss_mask.tolist() for s in replay.samples] == [s["loss_mask"] for s in stored]
    assert replay.memory == record["memory"]
    assert replay.metrics.as_dict() == record["metrics"]


def test_demonstrations_compress_with_both_block_kinds_and_use_what_they_read(dataset):
  _, _, trajectories, segments = dataset
  with open(os.path.join(dataset[0], dataset_lib.SUMMARY)) as f:
    summary = json.load(f)
  assert summary["share_crossing_threshold"] > 0.5 and summary["share_with_used_read"] > 0.5
  record = next(t for t in trajectories if t["stats"]["anchor_blocks"] and
                t["stats"]["explicit_blocks"] and t["stats"]["reads_used"])
  stored = sorted(segments[record["demo"]], key=lambda s: s["segment_index"])
  first = "\n".join(m["content"] for m in stored[0]["messages"])
  [compress] = [parse_turn(m["content"]).call for m in stored[0]["messages"][-1:]]
  assert compress.name == "CompressExperience"
  for block in compress.arguments["db_blocks"]:
    content = record["memory"][block["index"]]["content"]
    if "db_content" in block:
      assert content == block["db_content"]
    else:  # The look listing, verbatim, anchored in its one fixed form.
      listed = re.findall(r"\ban? ([a-z]+ \d+)", content)
      assert content in first and len(listed) > 1
      assert ([block[k] for k in ("start_anchor", "mid_anchor", "end_anchor")] ==
              [LISTING, listed[0], "."])
  # The progress state names types; the receptacle ids stay in the archive.
  receptacles = re.findall(r"\ban? ([a-z]+ \d+)", record["memory"]["room_listing"]["content"])
  assert receptacles and not any(r in compress.arguments["summary"] for r in receptacles)
  # A read brings back an archived block; the next action names ids only that block showed.
  segment = next(s["messages"][2:] for s in stored[1:]
                 if any("ReadExperience" in m["content"] for m in s["messages"]))
  calls = [parse_turn(m["content"]).call if m["role"] == "assistant" else None for m in segment]
  position = next(i for i, c in enumerate(calls) if c and c.name == "ReadExperience")
  content = record["memory"][calls[position].arguments["index"]]["content"]
  assert content in segment[position + 1]["content"]
  command = next(c.arguments["command"] for c in calls[position:] if c and c.name == "execute")
  before = "\n".join(m["content"] for m in segment[:position])
  fresh = [i for i in re.findall(r"\b[a-z]+ \d+\b", command)
           if not re.search(rf"\b{i}\b", before)]
  assert fresh and all(i in content for i in fresh)


def test_a_seed_fixes_the_demonstration(dataset, small_root, renderer, demonstration_config,
                                        demonstration_env):
  _, _, trajectories, segments = dataset
  record = min(trajectories, key=lambda t: t["metrics"]["steps"])
  game = os.path.join(small_root, record["game"])
  again = demos.make_demonstration(game, renderer, demonstration_config, record["seed"],
                                   demonstration_env)
  stored = sorted(segments[record["demo"]], key=lambda s: s["segment_index"])
  assert [s.token_ids.tolist() for s in again.samples] == [s["token_ids"] for s in stored]
  other = demos.make_demonstration(game, renderer, demonstration_config, record["seed"] + 1,
                                   demonstration_env)
  assert other.metrics.success
  assert [s.token_ids.tolist() for s in other.samples] != [s["token_ids"] for s in stored]


def test_games_whose_solution_fails_are_reported_not_written(broken_copy, tmp_path):
  game = broken_copy(["move ghost 1 to nowhere 1"])
  out = str(tmp_path / "out")
  summary = dataset_lib.write_demonstrations([game], out, num=1, seed=0, shards=1,
                                             progress=False)
  assert (summary["demonstrations"], summary["failed"]) == (0, 1)
  assert "'move ghost 1 to nowhere 1' failed" in summary["failures"][0]["error"]
  assert os.path.getsize(os.path.join(out, "segments-00000-of-00001.jsonl")) == 0
  with pytest.raises(FileNotFoundError, match="no segments"):
    list(dataset_lib.iter_sft_examples(str(tmp_path)))


def test_appworld_demonstrations_in_the_same_format(worlds, tmp_path):
  """AppWorld's expert writes the dataset SFT reads: the reads of archived API docs pay off."""
  out = str(tmp_path / "appworld")
  summary = dataset_lib.write_demonstrations(worlds["train"][:2], out, num=2, seed=0, shards=1,
                                             progress=False, family="appworld")
  assert (summary["demonstrations"], summary["failed"]) == (2, 0), summary["failures"]
  assert summary["share_with_used_read"] == 1.0 and summary["mean_empty_searches"] == 0.0
  with open(os.path.join(out, dataset_lib.SUMMARY)) as f:
    written = json.load(f)
  assert sum(written["task_types"].values()) == 2 and written["segments"] >= 4
  examples = list(dataset_lib.iter_sft_examples(out))
  assert len(examples) == written["segments"]
  assert all(ids.shape == mask.shape and 0 < mask.sum() < len(mask) for ids, mask in examples)
  with open(os.path.join(out, dataset_lib.TRAJECTORIES)) as f:
    assert all(json.loads(line)["metrics"]["success"] for line in f)


def test_cli_records_demonstrations_under_the_compact_prompt_turn_cap_slips_and_plan(
    small_root, search_prior, tmp_path):
  prior = str(tmp_path / "search_prior.json")
  search_prior.save(prior)
  out = str(tmp_path / "demos")
  with contextlib.redirect_stdout(io.StringIO()):
    dataset_lib.main(["--games", small_root, "--split", "valid_seen", "--out", out, "--num", "1",
                      "--workers", "1", "--shards", "1", "--prior", prior,
                      "--prompt-style", "compact", "--max-turn-tokens", "300",
                      "--slip-rate", "0.5", "--plan-steps", "--plan-weight", "3",
                      "--restate-task", "--restate-location"])
  with open(os.path.join(out, dataset_lib.SUMMARY)) as f:
    summary = json.load(f)
  assert summary["agent"]["prompt_style"] == "compact"
  assert summary["slip_rate"] == 0.5 and summary["mean_refused"] >= 1
  assert summary["plan_steps"] is True and summary["plan_weight"] == 3
  assert summary["restate_task"] is True and summary["restate_location"] is True
  assert summary["agent"]["max_turn_tokens"] == 300 and summary["longest_turn"] <= 300
  with open(os.path.join(out, "segments-00000-of-00001.jsonl")) as f:
    system = json.loads(f.readline())["messages"][0]["content"]
  agent = smollm2_alfworld(prompt_style="compact")
  assert system == build_system_prompt(agent.tool_schemas(), agent.mode, agent.env_instructions,
                                       "compact")
  assert "- ReadExperience(index):" in system and '{"type": "function"' not in system
  with open(os.path.join(out, "segments-00000-of-00001.jsonl")) as f:
    first = json.loads(f.readline())
  assert any(". Task plan: find and " in m["content"] and "Task: " in m["content"]
             for m in first["messages"])
  located = [re.match(r"Holding: [^.]+\. At: [^.]+\. ", m["content"]) for m in first["messages"]
             if m["content"].startswith("Holding: ")]
  assert located and all(located)
  assert max(first["loss_mask"]) == 3  # the plan's turn; every other trained token weighs 1


def test_plan_openings_are_written_flagged_trained_and_kept_out_of_the_episodes(
    small_root, search_prior, tmp_path):
  prior = str(tmp_path / "search_prior.json")
  search_prior.save(prior)
  out = str(tmp_path / "demos")
  argv = ["--games", small_root, "--split", "valid_seen", "--out", out, "--num", "1",
          "--workers", "1", "--shards", "1", "--prior", prior, "--plan-steps", "--plan-openings",
          "2"]
  printed = io.StringIO()
  with contextlib.redirect_stdout(printed):
    dataset_lib.main(argv)
  with open(os.path.join(out, dataset_lib.SUMMARY)) as f:
    summary = json.load(f)
  assert (summary["demonstrations"], summary["openings"], summary["failed_openings"]) == (1, 2, 0)
  assert summary["opening_segments"] == 2 and "2 openings (0 failed)" in printed.getvalue()
  with open(os.path.join(out, dataset_lib.TRAJECTORIES)) as f:
    written = [json.loads(line) for line in f]
  assert [(t["demo"], t["opening"]) for t in written] == [(0, False), (1, True), (2, True)]
  # The openings come from the games after the demonstrated one in the seeded order.
  assert len({t["game"] for t in written}) == 3
  assert not any(t["metrics"]["success"] for t in written[1:])
  assert [r["trajectory_id"] for r in dataset_lib.demonstration_records(out)] == [0]
  examples = list(dataset_lib.iter_sft_examples(out))
  assert len(examples) == written[0]["metrics"]["num_segments"] + 2
  with pytest.raises(SystemExit):
    dataset_lib.main([a for a in argv if a != "--plan-steps"])


def test_demonstrations_read_back_as_episode_records_that_show_prints(dataset, capsys):
  out, _, trajectories, segments = dataset
  found = dataset_lib.demonstration_records(out)
  assert [r["trajectory_id"] for r in found] == [t["demo"] for t in trajectories]
  for record in found:
    stored = sorted(segments[record["trajectory_id"]], key=lambda s: s["segment_index"])
    assert record["segments"] == [s["messages"] for s in stored]
    assert record["metrics"]["success"] and record["task"]
  assert show.main([out, "--index", "1"], read=dataset_lib.demonstration_records) == 0
  printed = capsys.readouterr().out
  assert printed.startswith(f"# {found[1]['game']}\n\nTask: {found[1]['task']}\n")
  assert printed.count("## Segment ") == len(found[1]["segments"])
  assert show.main([out, "--census"], read=dataset_lib.demonstration_records) == 0
  assert capsys.readouterr().out.startswith(f"{NUM} episodes, {NUM} won; finished by env_done")
