import pytest

from memex_jax.demos.alfworld_config import DemonstrationConfig


def test_the_default_plays_clean_demonstrations():
  config = DemonstrationConfig()
  assert (config.slip_rate, config.wrong_take_rate, config.wrong_next_rate) == (0, 0, 0)
  assert (config.found_weight, config.plan_weight, config.decision_weight) == (1, 1, 1)
  assert config.prior is None
  assert not config.plan_steps


@pytest.mark.parametrize("setting, message", [
    ({"found_weight": 0}, "found_weight=0 must be >= 1"),
    ({"decision_weight": 0}, "decision_weight=0 must be >= 1"),
    ({"plan_weight": 0}, "plan_weight=0 must be >= 1"),
    ({"slip_rate": 1.0}, "slip_rate=1.0 must be in"),
    ({"wrong_take_rate": -0.1}, "wrong_take_rate=-0.1 must be in"),
    ({"wrong_next_rate": 1.5}, "wrong_next_rate=1.5 must be in"),
])
def test_bad_settings_are_refused(setting, message):
  with pytest.raises(ValueError, match=message):
    DemonstrationConfig(**setting)
