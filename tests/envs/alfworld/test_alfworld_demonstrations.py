"""Expert demonstrations with memory: written by the CLI, replayed through the real agent loop."""

import contextlib
import io
import json
import os
import re
import shutil

import numpy as np
import pytest

from memex_jax.agent import (ChatRenderer, EpisodeSpec, ScriptedPolicy, parse_turn,
                             run_episodes)
from memex_jax.envs.alfworld import demonstrations as demos
from memex_jax.envs.alfworld import games
from memex_jax.envs.alfworld import generate
from memex_jax.envs.alfworld import pddl
from memex_jax.envs.alfworld.env import AlfWorldEnv, memex_harder

# Small scenes keep the engine fast; a lower threshold makes them long enough to need memory.
MAX_RECEPTACLES = 12
THRESHOLD = 1024
NUM = 4


@pytest.fixture(scope="module")
def renderer(smollm2_tokenizer):
  return ChatRenderer(smollm2_tokenizer)


@pytest.fixture(scope="module")
def config():
  return demos.DemonstrationConfig(agent=demos.smollm2_agent_config(threshold=THRESHOLD))


@pytest.fixture(scope="module")
def env(config):
  return AlfWorldEnv(config.env)


@pytest.fixture(scope="module")
def small_root(games_root, manifest, tmp_path_factory):
  """A game root holding only the generated split's small scenes."""
  root = tmp_path_factory.mktemp("small_games")
  for record in manifest:
    if record["num_receptacles"] <= MAX_RECEPTACLES:
      shutil.copytree(os.path.join(games_root, record["path"]), root / record["path"])
  return str(root)


@pytest.fixture(scope="module")
def dataset(small_root, tmp_path_factory):
  """The CLI's output over the small scenes (2 worker processes), and what it printed."""
  out = str(tmp_path_factory.mktemp("demos"))
  argv = ["--games", small_root, "--split", "valid_seen", "--out", out, "--num", str(NUM),
          "--seed", "3", "--workers", "2", "--shards", "2", "--threshold", str(THRESHOLD)]
  printed = io.StringIO()
  with contextlib.redirect_stdout(printed):
    demos.main(argv)
  with open(os.path.join(out, demos.TRAJECTORIES)) as f:
    trajectories = [json.loads(line) for line in f]
  segments = {}
  for name in sorted(os.listdir(out)):
    if name.startswith(demos.SEGMENTS_PREFIX):
      with open(os.path.join(out, name)) as f:
        for line in f:
          record = json.loads(line)
          segments.setdefault(record["demo"], []).append(record)
  return out, printed.getvalue(), trajectories, segments


def test_the_smollm2_preset_and_the_harder_env():
  agent = demos.smollm2_agent_config()
  assert (agent.mode, agent.context_window, agent.threshold, agent.summary_token_budget) == (
      "memex", 8192, 2048, 300)
  assert "look (once per episode" in agent.env_instructions
  env_config = demos.DemonstrationConfig().env
  assert env_config == memex_harder()
  with pytest.raises(ValueError, match="min_survey <= max_survey"):
    demos.DemonstrationConfig(min_survey=5, max_survey=2)


def test_cli_writes_shards_trajectories_and_a_summary(dataset, small_root, renderer):
  out, printed, trajectories, segments = dataset
  with open(os.path.join(out, demos.SUMMARY)) as f:
    summary = json.load(f)
  assert summary["demonstrations"] == NUM and summary["failed"] == 0
  assert summary["agent"]["threshold"] == THRESHOLD
  assert re.search(r"\d+% of the demonstrations cross the compression threshold; \d+% need a "
                   r"ReadExperience whose content a later action uses", printed)
  assert sorted(f for f in os.listdir(out) if f.startswith(demos.SEGMENTS_PREFIX)) == [
      "segments-00000-of-00002.jsonl", "segments-00001-of-00002.jsonl"]
  assert [t["demo"] for t in trajectories] == list(range(NUM))
  assert len(set(t["game"] for t in trajectories)) > 1
  assert all(os.path.isdir(os.path.join(small_root, t["game"])) for t in trajectories)
  assert summary["segments"] == sum(len(s) for s in segments.values())
  examples = list(demos.iter_sft_examples(out))
  assert len(examples) == summary["segments"]
  assert summary["tokens"] == sum(len(ids) for ids, _ in examples)
  for ids, mask in examples:
    assert ids.dtype == mask.dtype == np.int32 and ids.shape == mask.shape
    trained = renderer.tokenizer.decode(ids[mask == 1])
    assert "<tool_call>" in trained and "<tool_response>" not in trained
    assert len(ids) <= 8192


def _replay(record_segments, game, renderer, config, env):
  script = [m["content"] for s in record_segments for m in s["messages"]
            if m["role"] == "assistant"]
  policy = ScriptedPolicy(renderer, [script])
  [trajectory] = run_episodes(policy, [EpisodeSpec(env, game)], renderer, config.agent)
  return trajectory


def test_replayed_demonstrations_win_cleanly_with_the_stored_ids(dataset, small_root, renderer,
                                                                 config, env):
  _, _, trajectories, segments = dataset
  # The two that compress most: the memory paths are the ones worth replaying.
  sample = sorted(trajectories, key=lambda t: -t["metrics"]["num_compress"])[:2]
  for record in sample:
    stored = sorted(segments[record["demo"]], key=lambda s: s["segment_index"])
    replay = _replay(stored, os.path.join(small_root, record["game"]), renderer, config, env)
    m = replay.metrics
    assert m.success and m.finish_reason == "env_done", record["game"]
    assert m.num_malformed == 0 and (m.p_context, m.p_redundancy, m.p_format) == (0, 0, 0)
    assert [s.token_ids.tolist() for s in replay.segments] == [s["token_ids"] for s in stored]
    assert [s.loss_mask.tolist() for s in replay.segments] == [s["loss_mask"] for s in stored]
    assert replay.memory == record["memory"]
    assert replay.metrics.as_dict() == record["metrics"]


def test_demonstrations_compress_with_both_block_kinds_and_use_what_they_read(dataset):
  _, _, trajectories, segments = dataset
  with open(os.path.join(dataset[0], demos.SUMMARY)) as f:
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
    else:  # Verbatim from the working context, and holding exact ids.
      assert content in first and content.startswith(block["start_anchor"])
      assert re.search(r"\b[a-z]+ \d+\b", content)
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


def test_a_seed_fixes_the_demonstration(dataset, small_root, renderer, config, env):
  _, _, trajectories, segments = dataset
  record = min(trajectories, key=lambda t: t["metrics"]["steps"])
  game = os.path.join(small_root, record["game"])
  again = demos.make_demonstration(game, renderer, config, record["seed"], env)
  stored = sorted(segments[record["demo"]], key=lambda s: s["segment_index"])
  assert [s.token_ids.tolist() for s in again.segments] == [s["token_ids"] for s in stored]
  other = demos.make_demonstration(game, renderer, config, record["seed"] + 1, env)
  assert other.metrics.success
  assert [s.token_ids.tolist() for s in other.segments] != [s["token_ids"] for s in stored]


def test_a_receptacle_sharing_the_current_spot_is_examined_instead(tmp_path, renderer, config,
                                                                    env):
  # Bedroom 312 stacks shelves on one spot: from one, "go to" another does nothing.
  spec = generate.game_spec("train", 1, 7, "pick_two_obj_and_place")
  pddl.write_game(spec, str(tmp_path / "game"), name="shelves")
  for seed in range(4):
    trajectory = demos.make_demonstration(str(tmp_path / "game"), renderer, config, seed, env)
    messages = [m for s in trajectory.segments for m in s.messages[2:]]
    failed = [i for i, m in enumerate(messages) if "\nNothing happens.\n" in m.content]
    if failed:
      break
  assert failed and trajectory.metrics.success and trajectory.metrics.p_redundancy == 0
  gone = parse_turn(messages[failed[0] - 1].content).call.arguments["command"]
  examined = parse_turn(messages[failed[0] + 1].content).call.arguments["command"]
  assert examined == gone.replace("go to", "examine")
  assert "you see" in messages[failed[0] + 2].content


def _broken_copy(small_root, tmp_path, walkthrough):
  source = games.find_games(small_root, "valid_seen")[0]
  folder = tmp_path / "broken"
  shutil.copytree(source, folder)
  path = folder / games.GAME_FILE
  game = json.loads(path.read_text())
  if walkthrough is None:
    del game["walkthrough"]
  else:
    game["walkthrough"] = walkthrough
  path.write_text(json.dumps(game))
  return str(folder)


def test_a_failing_solution_raises_naming_the_game_and_command(small_root, tmp_path, renderer,
                                                               env):
  game = _broken_copy(small_root, tmp_path, ["take ghost 1 from nowhere 1"])
  # A short episode leaves no room for a survey: the bad command runs right after look.
  short = demos.DemonstrationConfig(agent=demos.smollm2_agent_config(max_steps=8))
  with pytest.raises(demos.DemonstrationError,
                     match=r"broken: 'take ghost 1 from nowhere 1' failed: 'Nothing "
                     r"happens.'"):
    demos.make_demonstration(game, renderer, short, 0, env)


def test_games_without_a_solution_are_reported_not_written(small_root, tmp_path):
  game = _broken_copy(small_root, tmp_path, None)
  with pytest.raises(demos.DemonstrationError, match="has no 'walkthrough'"):
    demos.read_walkthrough(game)
  out = str(tmp_path / "out")
  summary = demos.write_demonstrations([game], out, num=1, seed=0, shards=1, progress=False)
  assert (summary["demonstrations"], summary["failed"]) == (0, 1)
  assert "game.tw-pddl has no 'walkthrough'" in summary["failures"][0]["error"]
  assert os.path.getsize(os.path.join(out, "segments-00000-of-00001.jsonl")) == 0
  with pytest.raises(FileNotFoundError, match="no segments"):
    list(demos.iter_sft_examples(str(tmp_path)))
