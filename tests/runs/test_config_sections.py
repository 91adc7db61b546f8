"""Config sections become their step's objects whole; bad sections end a run with one line."""

import dataclasses

import ml_collections
import pytest

from memex_jax.rl import LossConfig, advantage_fn, make_optimizer
from memex_jax.runs import config_sections
from memex_jax.runs import start


def _section(**values):
  return ml_collections.ConfigDict(values)


def test_a_section_builds_its_dataclass_with_overrides_winning():
  loss = config_sections.from_section(
      LossConfig, _section(clip_low=0.1, kl_coef=0.0, temperature=0.5), "config.loss",
      temperature=0.7)
  assert loss == dataclasses.replace(LossConfig(), clip_low=0.1, kl_coef=0.0, temperature=0.7)
  # Functions take their keyword arguments; a missing section means defaults.
  assert config_sections.from_section(make_optimizer, None, "config.optim") is not None


def test_unknown_keys_and_refused_values_name_the_section():
  with pytest.raises(config_sections.ConfigError,
                     match=r"config.loss has \['clip_lo'\], which LossConfig does not take"):
    config_sections.from_section(LossConfig, _section(clip_lo=0.1), "config.loss")
  with pytest.raises(config_sections.ConfigError, match="config.loss: LossConfig.normalisation"):
    config_sections.from_section(LossConfig, _section(normalisation="mean"), "config.loss")
  # A function with **options checks them itself; its refusal is a ConfigError too.
  with pytest.raises(config_sections.ConfigError, match="config.advantage: .*'drop'"):
    config_sections.from_section(advantage_fn, _section(name="grpo", drop=True),
                                 "config.advantage")


def test_entry_points_end_with_one_config_error_line():
  @start.exits_on_config_error
  def main(argv):
    del argv
    config_sections.from_section(LossConfig, _section(tis_cap=-1.0), "config.loss")

  with pytest.raises(SystemExit, match=r"^config error: config.loss: LossConfig.tis_cap=-1.0"):
    main([])
