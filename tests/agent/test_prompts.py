"""The system prompt lists exactly the regime's tools and explains the memory rules."""

import json

import pytest

from memex_jax.agent import AgentConfig, build_system_prompt


def _tools_in(prompt):
  block = prompt.split("<tools>\n")[1].split("\n</tools>")[0]
  return [json.loads(line)["function"]["name"] for line in block.splitlines()]


def test_memex_prompt_explains_compression_reading_and_scoring():
  config = AgentConfig(mode="memex")
  prompt = build_system_prompt(config.tool_schemas(), config.mode, "Rooms have exits.")
  assert _tools_in(prompt) == ["execute", "CompressExperience", "ReadExperience", "Finish"]
  assert "[Context Status: working=W, total=T, threshold=L]" in prompt
  assert "start_anchor" in prompt and "Call ReadExperience" in prompt
  assert "Rooms have exits." in prompt and "# Scoring" in prompt


def test_baseline_prompts_omit_what_they_do_not_have():
  config = AgentConfig(mode="summary_only")
  prompt = build_system_prompt(config.tool_schemas(), config.mode)
  assert "ReadExperience" not in prompt and "anything it leaves out is gone" in prompt
  config = AgentConfig(mode="full_context")
  prompt = build_system_prompt(config.tool_schemas(), config.mode)
  assert "CompressExperience" not in prompt and "Context Status" not in prompt


def test_compact_prompt_keeps_every_tool_and_rule_in_fewer_words():
  for mode in ("memex", "summary_only", "full_context"):
    config = AgentConfig(mode=mode, prompt_style="compact")
    full = build_system_prompt(config.tool_schemas(), mode, "Rooms have exits.")
    compact = build_system_prompt(config.tool_schemas(), mode, "Rooms have exits.", "compact")
    assert len(compact) < 0.7 * len(full)
    for schema in config.tool_schemas():
      assert f"- {schema['name']}(" in compact
    assert "<tool_call>" in compact and "Rooms have exits." in compact
    assert ("Context Status" in compact) == (mode != "full_context")
  memex = AgentConfig(mode="memex")
  compact = build_system_prompt(memex.tool_schemas(), memex.mode, style="compact")
  assert ("- CompressExperience(summary, db_blocks?: [{index, description, db_content?, "
          "start_anchor?, mid_anchor?, end_anchor?}]):") in compact


def test_unknown_prompt_style_is_refused():
  with pytest.raises(ValueError, match="prompt style"):
    build_system_prompt([], "memex", style="terse")
  with pytest.raises(ValueError, match="prompt_style"):
    AgentConfig(prompt_style="terse")
