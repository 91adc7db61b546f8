"""What the demonstration tests share (the generated ALFWorld split is in tests/conftest.py):
renderer, training games and their search prior, config, engine, the split's small scenes and
the expert's play of them, broken games."""

import dataclasses
import json
import os
import shutil

import pytest

from memex_jax.agent import ChatRenderer
from memex_jax import demos
from memex_jax.agent.presets import smollm2_alfworld
from memex_jax.demos import search_prior as search_prior_lib
from memex_jax.envs.alfworld import games
from memex_jax.envs.alfworld import generate
from memex_jax.envs.alfworld.env import AlfWorldEnv

# Small scenes keep the engine fast; a lower threshold makes them long enough to need memory.
MAX_RECEPTACLES = 12
DEMONSTRATION_THRESHOLD = 1024
NUM_TRAIN_GAMES = 40


@pytest.fixture(scope="session")
def renderer(smollm2_tokenizer):
  return ChatRenderer(smollm2_tokenizer)


@pytest.fixture(scope="session")
def train_games(tmp_path_factory):
  """Generated train games: where the search prior comes from (never the split played)."""
  root = str(tmp_path_factory.mktemp("alfworld_train"))
  generate.generate_split(root, "train", NUM_TRAIN_GAMES, seed=0, workers=1, progress=False)
  return games.find_games(root, "train")


@pytest.fixture(scope="session")
def search_prior(train_games):
  return search_prior_lib.estimate(train_games)


@pytest.fixture(scope="session")
def demonstration_config(search_prior):
  return demos.DemonstrationConfig(
      agent=smollm2_alfworld(threshold=DEMONSTRATION_THRESHOLD), prior=search_prior)


@pytest.fixture(scope="session")
def demonstration_env(demonstration_config):
  return AlfWorldEnv(demonstration_config.env)


@pytest.fixture(scope="session")
def small_root(games_root, manifest, tmp_path_factory):
  """A game root holding only the generated split's small scenes."""
  root = tmp_path_factory.mktemp("small_games")
  for record in manifest:
    if record["num_receptacles"] <= MAX_RECEPTACLES:
      shutil.copytree(os.path.join(games_root, record["path"]), root / record["path"])
  return str(root)


@pytest.fixture(scope="session")
def play_small_games(small_root, renderer, demonstration_env):
  """Plays every small game with a config at a seed: [(game, demonstration)]."""
  def play(config, seed=0):
    return [(game, demos.make_demonstration(game, renderer, config, seed, demonstration_env))
            for game in games.find_games(small_root, "valid_seen")]
  return play


@pytest.fixture(scope="session")
def played(play_small_games, demonstration_config):
  """Every small game, played twice (two seeds: two orders among equally likely places):
  [(game, seed, demonstration)]."""
  return [(game, seed, trajectory) for seed in (0, 1)
          for game, trajectory in play_small_games(demonstration_config, seed)]


@pytest.fixture(scope="session")
def played_with_wrong_takes(play_small_games, demonstration_config):
  """Every small game at seed 0, the expert taking wrongly at most decisions to search on."""
  return play_small_games(dataclasses.replace(demonstration_config, wrong_take_rate=0.9))


@pytest.fixture(scope="session")
def played_with_wrong_nexts(play_small_games, demonstration_config):
  """Every small game at seed 0, the expert's search going first to the place it is at at most
  of its next-place lookups."""
  return play_small_games(dataclasses.replace(demonstration_config, wrong_next_rate=0.9))


@pytest.fixture
def broken_copy(small_root, tmp_path):
  """Makes `tmp_path/broken`: a small game with its walkthrough replaced (None: removed)."""
  def make(walkthrough):
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
  return make
