"""Generated ALFWorld games shared by the env tests (the pool's workers run the real engine)."""

import pytest

from memex_jax.envs.alfworld import generate


@pytest.fixture(scope="session")
def games_root(tmp_path_factory):
  """Output root holding 12 valid_seen games (seed 0) and their manifest."""
  root = tmp_path_factory.mktemp("alfworld_games")
  generate.generate_split(str(root), "valid_seen", num=12, seed=0, workers=1, progress=False)
  return str(root)


@pytest.fixture(scope="session")
def manifest(games_root):
  return generate.generate_split(games_root, "valid_seen", num=12, seed=0, workers=1,
                                 progress=False)
