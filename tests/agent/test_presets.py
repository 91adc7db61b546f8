"""Agent presets: SmolLM2 on ALFWorld, with the environment's own instructions."""

from memex_jax.agent import presets
from memex_jax.envs.alfworld import instructions


def test_smollm2_alfworld_is_sized_for_its_window_and_takes_overrides():
  config = presets.smollm2_alfworld(threshold=1024)
  assert (config.context_window, config.threshold, config.summary_token_budget) == (8192, 1024, 300)
  assert config.env_instructions == instructions.INSTRUCTIONS
  assert instructions.THING_ID.findall("go to drawer 12 and take apple 3") == ["drawer 12",
                                                                                "apple 3"]
