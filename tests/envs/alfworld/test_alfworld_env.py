"""The wrapper on the real engine: walkthroughs win, harder options, state changes, bad input."""

import json
import os

import pytest

from memex_jax.envs import base
from memex_jax.envs.alfworld import env as alfworld_env
from memex_jax.envs.alfworld import games


def _walkthrough(folder):
  with open(os.path.join(folder, games.GAME_FILE)) as f:
    return json.load(f)["walkthrough"]


@pytest.fixture(scope="module")
def plain():
  return alfworld_env.AlfWorldEnv()


@pytest.fixture(scope="module")
def harder():
  return alfworld_env.AlfWorldEnv(alfworld_env.memex_harder())


@pytest.fixture(scope="module")
def small_game(games_root, manifest):
  """The game with the fewest receptacles (fast to load)."""
  record = min(manifest, key=lambda r: r["num_receptacles"])
  return os.path.join(games_root, record["path"])


def test_implements_the_env_protocol(plain):
  assert isinstance(plain, base.Env)


@pytest.mark.slow
def test_generated_games_are_won_by_their_walkthroughs(plain, games_root, manifest):
  # The five smallest scenes keep this quick; the generator tests cover other plans.
  sample = sorted(manifest, key=lambda r: r["num_receptacles"])[:5]
  for record in sample:
    folder = os.path.join(games_root, record["path"])
    task_text, observation = plain.reset(folder)
    assert task_text == record["task_text"]
    assert "Looking quickly around you, you see" in observation
    won = False
    for command in _walkthrough(folder):
      observation, done, won, info = plain.step(command)
      assert observation != "Nothing happens.", (record["path"], command)
      assert info["changed_state"]
    assert won and done, record["path"]


def test_partial_credit_counts_goal_conditions_along_the_walkthrough(harder, games_root,
                                                                   manifest):
  two_conditions = ("pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
                    "pick_clean_then_place_in_recep", "pick_two_obj_and_place")
  record = min((r for r in manifest if r["task_type"] in two_conditions),
               key=lambda r: r["num_receptacles"])
  folder = os.path.join(games_root, record["path"])
  harder.reset(folder)
  scores = [harder.step(command)[3]["score"] for command in ["look"] + _walkthrough(folder)]
  assert scores[0] == 0.0 and scores[-1] == 1.0, (record["path"], scores)
  assert 0.5 in scores, (record["path"], scores)  # one condition of two met on the way
  assert all(0.0 <= s <= 1.0 for s in scores)


def test_harder_hides_listing_and_commands_until_one_look(plain, harder, small_game):
  _, plain_first = plain.reset(small_game)
  listing = plain_first.split("\n\n")[0]
  task_text, first = harder.reset(small_game)
  assert first == "You are in the middle of a room."
  assert "Admissible" not in first and task_text == plain.task_text
  observation, done, won, info = harder.step("look")
  # The engine's own look lists nothing mid-room; the wrapper returns the hidden listing.
  assert observation == listing and "you see a " in observation
  assert "admissible_commands" not in info and not done and not won
  observation, _, _, info = harder.step("look")
  assert observation == alfworld_env.LOOK_UNAVAILABLE
  assert not info["changed_state"]
  assert harder.summary_token_budget == 300


def test_look_away_from_the_middle_still_reveals_the_room(harder, small_game):
  harder.reset(small_game)
  harder.step(_walkthrough(small_game)[0])
  observation, _, _, _ = harder.step("look")
  assert observation.startswith("You are facing the ")
  assert "Looking around the room, you see a " in observation


def test_plain_lists_admissible_commands(plain, small_game):
  _, first = plain.reset(small_game)
  observation, _, _, info = plain.step("inventory")
  assert "go to" in first and "Admissible commands: " in first
  assert info["admissible_commands"] and "look" in info["admissible_commands"]
  assert observation.endswith(", ".join(info["admissible_commands"]) + ".")


def test_changed_state_follows_the_engine_facts(harder, small_game):
  harder.reset(small_game)
  first_move = _walkthrough(small_game)[0]
  assert first_move.startswith("go to ")
  _, _, _, info = harder.step(first_move)
  assert info["changed_state"] and harder.changes_state(first_move)
  _, _, _, info = harder.step(first_move)  # already there: no fact changes
  assert not info["changed_state"] and not harder.changes_state(first_move)
  observation, done, won, info = harder.step("fly to the moon")
  assert observation == "Nothing happens." and not info["changed_state"]
  assert not done and not won
  with pytest.raises(ValueError, match="most recent step"):
    harder.changes_state(first_move)


def test_commands_are_normalised(harder, small_game):
  harder.reset(small_game)
  move = _walkthrough(small_game)[0]
  observation, _, _, info = harder.step("  " + move.upper().replace(" ", "   ") + " ")
  assert observation.startswith("You arrive at") and info["changed_state"]


def test_episode_ends_after_max_steps(small_game):
  env = alfworld_env.AlfWorldEnv(alfworld_env.memex_harder(max_steps=2))
  env.reset(small_game)
  assert env.step("inventory")[1] is False
  _, done, won, info = env.step("inventory")
  assert done and not won and info["steps"] == 2
  assert env.step("look")[0] == alfworld_env.EPISODE_OVER


def test_bad_games_and_options_are_clear_errors(tmp_path):
  plain = alfworld_env.AlfWorldEnv()
  with pytest.raises(FileNotFoundError, match="no ALFWorld game"):
    plain.reset(str(tmp_path))
  broken = tmp_path / "broken"
  broken.mkdir()
  (broken / games.GAME_FILE).write_text(json.dumps({"pddl_domain": "(define", "grammar": "",
                                                     "pddl_problem": "", "solvable": True}))
  with pytest.raises(ValueError, match="could not start .*broken"):
    plain.reset(str(broken))
  with pytest.raises(ValueError, match="expert"):
    alfworld_env.AlfWorldConfig(expert="oracle")
  with pytest.raises(RuntimeError, match="before reset"):
    alfworld_env.AlfWorldEnv().step("look")
