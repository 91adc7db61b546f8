"""Expert demonstrations with memory: the SmolLM2 preset, played games and clear failures."""

import collections
import dataclasses

import numpy as np
import pytest

from memex_jax.agent import parse_turn
from memex_jax import demos
from memex_jax.demos import alfworld_text
from memex_jax.demos.alfworld import weighted_decisions
from memex_jax.agent.presets import smollm2_alfworld
from memex_jax.envs.alfworld import games
from memex_jax.envs.alfworld import generate
from memex_jax.envs.alfworld import pddl
from memex_jax.envs.alfworld.env import memex_harder
from memex_jax.rl.sample import trained_runs


def test_the_smollm2_preset_and_the_harder_env():
  agent = smollm2_alfworld()
  assert (agent.mode, agent.context_window, agent.threshold, agent.summary_token_budget) == (
      "memex", 8192, 2048, 300)
  assert "look (once per episode" in agent.env_instructions
  env_config = demos.DemonstrationConfig().env
  assert env_config == memex_harder()


def test_a_receptacle_sharing_the_current_spot_is_examined_instead(
    tmp_path, renderer, demonstration_config, demonstration_env):
  # Bedroom 312 stacks shelves on one spot: from one, "go to" another does nothing.
  spec = generate.game_spec("train", 1, 7, "pick_two_obj_and_place")
  pddl.write_game(spec, str(tmp_path / "game"), name="shelves")
  for seed in range(4):
    trajectory = demos.make_demonstration(str(tmp_path / "game"), renderer, demonstration_config,
                                          seed, demonstration_env)
    messages = [m for s in trajectory.segments for m in s.messages[2:]]
    failed = [i for i, m in enumerate(messages) if "\nNothing happens.\n" in m.content]
    if failed:
      break
  assert failed and trajectory.metrics.success and trajectory.metrics.p_redundancy == 0
  gone = parse_turn(messages[failed[0] - 1].content).call.arguments["command"]
  examined = parse_turn(messages[failed[0] + 1].content).call.arguments["command"]
  assert examined == gone.replace("go to", "examine")
  assert "you see" in messages[failed[0] + 2].content


def test_a_failing_solution_raises_naming_the_game_and_command(broken_copy, renderer,
                                                               demonstration_env):
  game = broken_copy(["move ghost 1 to nowhere 1"])
  # Nothing to fetch, so no search: the bad command runs right after look.
  short = demos.DemonstrationConfig(agent=smollm2_alfworld(max_steps=8))
  with pytest.raises(demos.DemonstrationError,
                     match=r"broken: 'move ghost 1 to nowhere 1' failed: 'Nothing "
                     r"happens.'"):
    demos.make_demonstration(game, renderer, short, 0, demonstration_env)


def test_a_game_without_a_walkthrough_is_solved_by_the_planner_expert(broken_copy, renderer,
                                                                       demonstration_config,
                                                                       demonstration_env):
  game = broken_copy(None)
  with pytest.raises(demos.DemonstrationError, match="has no 'walkthrough'"):
    demos.read_walkthrough(game)
  plan = demos.planner_walkthrough(game)
  assert plan and demos.expert_solution(game) == plan
  trajectory = demos.make_demonstration(game, renderer, demonstration_config, 0,
                                        demonstration_env)
  assert trajectory.metrics.success
  played = [m.content for s in trajectory.segments for m in s.messages if m.role == "assistant"]
  assert plan[-1] in "".join(played)  # the planner's winning command was the demonstration's


def _decision_positions(trajectory, renderer):
  """Per segment, {position of each search decision's token: whether the place held the kind},
  from the rendered turns (independently of the loss mask)."""
  out = []
  for segment in trajectory.segments:
    messages = [{"role": m.role, "content": m.content} for m in segment.messages]
    positions = {}
    for d in alfworld_text.segment_decisions(messages):
      turn_starts = (len(renderer.render(segment.messages[:d.turn]).ids) +
                     len(renderer.generation_prompt_ids()))
      content = messages[d.turn]["content"]
      positions[turn_starts + len(renderer.tokenizer.encode(
          content[:d.decides_at]))] = d.present
    out.append(positions)
  return out


def test_the_decision_token_alone_takes_the_decision_weight(played, renderer):
  weighed = 0
  for game, _, trajectory in played:
    weighted = weighted_decisions(trajectory, 7, renderer.tokenizer)
    for segment, positions, before in zip(weighted.segments,
                                          _decision_positions(trajectory, renderer),
                                          trajectory.segments):
      mask, ids = segment.sample.loss_mask, segment.sample.token_ids
      assert sorted(np.flatnonzero(mask != before.sample.loss_mask)) == sorted(positions), game
      for position, present in positions.items():
        assert mask[position] == 7
        # The ":" of ": none" where the place lacked the kind; the space before the number of
        # the id taken where it held it.
        assert renderer.tokenizer.decode([int(ids[position])]) == (" " if present else ":")
        weighed += 1
  assert weighed >= 4
  assert weighted_decisions(trajectory, 1, renderer.tokenizer) is trajectory


def test_a_refused_take_keeps_its_decision_out_of_the_loss(play_small_games,
                                                          demonstration_config, renderer):
  config = dataclasses.replace(demonstration_config, decision_weight=5, found_weight=2,
                               wrong_take_rate=0.9)
  seen = collections.Counter()
  for game, trajectory in play_small_games(config):
    for segment, positions in zip(trajectory.segments,
                                  _decision_positions(trajectory, renderer)):
      mask = segment.sample.loss_mask
      for run in trained_runs(mask > 0):
        decided = [p for p in run if p in positions]
        rest = np.setdiff1d(run, decided)
        assert len(set(mask[rest].tolist())) == 1, game  # one weight per turn
        for p in decided:  # the turn's weight (1, or 2 for a found take) times 5
          assert mask[p] == 5 * mask[rest[0]], game
          seen[int(mask[p])] += 1
      # A wrong take is at weight 0, its decision token too (not among the trained runs).
      seen["left out"] += sum(mask[p] == 0 for p in positions)
  assert seen[5] >= 1 and seen[10] >= 2 and seen["left out"] >= 2, seen


def test_an_opening_is_the_demonstration_up_to_its_plan(small_root, renderer,
                                                         demonstration_config, demonstration_env):
  config = dataclasses.replace(demonstration_config, plan_steps=True, plan_weight=3)
  for game in games.find_games(small_root, "valid_seen"):
    whole = demos.make_demonstration(game, renderer, config, 1, demonstration_env)
    [opening] = demos.make_opening(game, renderer, config, 1, demonstration_env).segments
    turns = [m.content for m in opening.messages if m.role == "assistant"]
    assert len(turns) == demos.OPENING_STEPS, game
    assert alfworld_text.WRITTEN_PLAN.search(turns[-1]) and "Task plan" not in turns[0]
    # The same turns under the same context as the whole demonstration's first segment.
    first = whole.segments[0].messages
    assert [(m.role, m.content) for m in opening.messages] == [
        (m.role, m.content) for m in first[:len(opening.messages)]], game
    ids, mask = opening.sample.token_ids, opening.sample.loss_mask
    assert np.array_equal(ids, whole.segments[0].sample.token_ids[:len(ids)])
    assert [int(mask[run].max()) for run in trained_runs(mask)] == [1, 3]


def test_an_opening_needs_an_expert_that_plans(small_root, renderer, demonstration_config,
                                               demonstration_env):
  game = games.find_games(small_root, "valid_seen")[0]
  with pytest.raises(ValueError, match="plan_steps"):
    demos.make_opening(game, renderer, demonstration_config, 0, demonstration_env)
