"""AgentConfig: validation and the tool set of each memory regime."""

import pytest

from memex_jax.agent import AgentConfig


def _names(config):
  return [schema["name"] for schema in config.tool_schemas()]


def test_tool_sets_per_regime():
  assert _names(AgentConfig(mode="memex")) == [
      "execute", "CompressExperience", "ReadExperience", "Finish"]
  assert _names(AgentConfig(mode="summary_only")) == ["execute", "CompressExperience", "Finish"]
  assert _names(AgentConfig(mode="full_context", env_tool="act")) == ["act", "Finish"]


@pytest.mark.parametrize("field, value, message", [
    ("mode", "rag", "mode must be one of"),
    ("threshold", 0, "threshold must be >= 1"),
    ("summary_token_budget", -1, "summary_token_budget must be >= 0"),
    ("warn_fraction", 1.5, "warn_fraction must be in"),
    ("env_tool", "ReadExperience", "collides with a built-in tool"),
])
def test_bad_settings_are_named(field, value, message):
  with pytest.raises(ValueError, match=message) as error:
    AgentConfig(**{field: value})
  assert f"AgentConfig.{field}" in str(error.value)
