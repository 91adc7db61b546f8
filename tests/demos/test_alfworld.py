"""Expert demonstrations with memory: the SmolLM2 preset, played games and clear failures."""

import pytest

from memex_jax.agent import parse_turn
from memex_jax import demos
from memex_jax.agent.presets import smollm2_alfworld
from memex_jax.envs.alfworld import generate
from memex_jax.envs.alfworld import pddl
from memex_jax.envs.alfworld.env import memex_harder


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
