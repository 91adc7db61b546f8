"""The translation cache returns fast-downward's own results and keeps sys.argv intact."""

import json
import os
import sys

from memex_jax.envs.alfworld import games
from memex_jax.envs.alfworld import translation


def test_cached_translation_matches_and_is_reused(games_root, manifest):
  small = min(manifest, key=lambda r: r["num_receptacles"])
  path = os.path.join(games_root, small["path"], games.GAME_FILE)
  with open(path) as f:
    game = json.load(f)
  argv = list(sys.argv)
  _, fresh_sas = translation._original(game["pddl_domain"], game["pddl_problem"])
  sys.argv = list(argv)
  first = translation.cached_pddl2sas(game["pddl_domain"], game["pddl_problem"])
  assert sys.argv == argv and first[1] == fresh_sas
  assert translation.cached_pddl2sas(game["pddl_domain"], game["pddl_problem"]) is first
  optimized = translation.cached_pddl2sas(game["pddl_domain"], game["pddl_problem"],
                                          optimize=True)
  assert optimized is not first and optimized[1] != fresh_sas
