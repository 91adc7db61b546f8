"""The grammar-parse caches give TextWorld's own text: same parses, same played transcripts."""

import os
import random

from textworld import logic
from textworld.envs.pddl import textgen

from memex_jax.envs.alfworld import env as alfworld_env
from memex_jax.envs.alfworld import grammar_cache


def _play(game, commands_seed, steps=15):
  """The transcript of `steps` random admissible commands (observations, done, won)."""
  env = alfworld_env.AlfWorldEnv()
  rng = random.Random(commands_seed)
  _, observation = env.reset(game)
  transcript = [observation]
  for _ in range(steps):
    listing = observation.rsplit("Admissible commands: ", 1)[1].removesuffix(".")
    observation, done, won, _ = env.step(rng.choice(listing.split(", ")))
    transcript.append((observation, done, won))
  return transcript


def test_cached_parses_equal_tatsu_parses_and_symbols_are_fresh_copies():
  text = "You arrive at {r.name}. #examineReceptacle.feedback#"  # as ALFWorld's grammar has
  want = grammar_cache._original_symbols(text, rule_name="symbols")
  got = grammar_cache.cached_symbols(text, rule_name="symbols")
  assert repr(got) == repr(want)
  got[0].context = {"mutated": True}  # derivation assigns contexts: the cache must not see it
  again = grammar_cache.cached_symbols(text, rule_name="symbols")
  assert again is not got and again[0].context == {} and repr(again) == repr(want)
  grammar_cache.install()
  query = "atlocation(a:agent, l:location) & receptacleatlocation(r:receptacle, l:location)"
  assert str(logic.Rule.parse_conjunctive_query(query)) == str(
      grammar_cache._original_query(logic.Rule, query))
  assert logic.Rule.parse_conjunctive_query(query) is logic.Rule.parse_conjunctive_query(query)


def test_a_played_game_reads_the_same_with_and_without_the_caches(games_root, manifest,
                                                                    monkeypatch):
  record = max(manifest, key=lambda r: r["num_receptacles"] if r["num_receptacles"] <= 20 else 0)
  game = os.path.join(games_root, record["path"])
  cached = _play(game, commands_seed=3)  # AlfWorldEnv installs the caches
  assert textgen._parse_and_convert is grammar_cache.cached_symbols
  with monkeypatch.context() as patch:
    patch.setattr(textgen, "_parse_and_convert", grammar_cache._original_symbols)
    patch.setattr(logic.Rule, "parse_conjunctive_query",
                  classmethod(grammar_cache._original_query))
    patch.setattr(grammar_cache, "install", lambda: None)  # keep TextWorld's own parses
    uncached = _play(game, commands_seed=3)
  assert cached == uncached
  assert len({observation for observation, _, _ in cached[1:]}) > 3  # the game really moved
