"""The search prior: P(receptacle type | object type) counted from the games it is given only."""

import collections

import pytest

from memex_jax.demos import search_prior as search_prior_lib


def test_counts_are_the_initial_placements_of_the_games_given(train_games):
  half = train_games[:len(train_games) // 2]
  prior = search_prior_lib.estimate(half)
  expected = collections.Counter(p for g in half for p in search_prior_lib.initial_scene(g)[1])
  assert prior.num_games == len(half)
  assert {(o, r): n for o, row in prior.counts.items() for r, n in row.items()} == expected
  # The other games' placements are not counted: an object type only they hold is unknown.
  rest = {o for g in train_games[len(half):] for o, _ in search_prior_lib.initial_scene(g)[1]}
  unseen = sorted(rest - set(prior.counts))
  assert unseen, "the two halves should differ in some object type"
  assert len({prior.probability(unseen[0], r) for r in prior.receptacle_types}) == 1


def test_probabilities_are_smoothed_and_sum_to_one(search_prior):
  bread = search_prior.counts["bread"]
  likeliest = max(bread, key=bread.get)
  assert search_prior.probability("bread", likeliest) > search_prior.probability("bread", "toilet")
  assert search_prior.probability("bread", "toilet") > 0  # never seen there, still possible
  assert sum(search_prior.probability("bread", r)
             for r in search_prior.receptacle_types) == pytest.approx(1)


def test_save_and_load_round_trip(search_prior, tmp_path):
  path = str(tmp_path / "prior.json")
  search_prior.save(path)
  assert search_prior_lib.SearchPrior.load(path) == search_prior
  with pytest.raises(ValueError, match="at least one game"):
    search_prior_lib.estimate([])
