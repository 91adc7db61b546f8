"""CompressExperience / ReadExperience / Finish: schemas and argument checking."""

import pytest

from memex_jax.memory import (ExperienceStore, ToolArgumentError, compress_schema,
                              finish_schema, plan_compression, read_schema, string_argument)

WORKING = ("<tool_response>\nThe note reads: 'Vault code: QXR-4821. Burn after reading.'\n"
           "</tool_response>\nYou are in corridor room 1. Exits: west, east.")


def _anchored(index="note", start="The note reads", mid="Vault code", end="reading."):
  return {"index": index, "description": "the vault note", "start_anchor": start,
          "mid_anchor": mid, "end_anchor": end}


def test_plan_has_explicit_and_verbatim_anchored_blocks():
  plan = plan_compression({"summary": "Read the note.", "db_blocks": [
      _anchored(), {"index": "plan", "description": "mine", "db_content": "go east"}]},
                          WORKING, ExperienceStore())
  assert plan.state == "Read the note."
  assert [(b.index, b.content, b.anchored) for b in plan.blocks] == [
      ("note", "The note reads: 'Vault code: QXR-4821. Burn after reading.", True),
      ("plan", "go east", False)]


@pytest.mark.parametrize("blocks, message", [
    ([_anchored(index="bad key")], r"db_blocks\[0\]: index 'bad key' is invalid"),
    ([_anchored(), _anchored()], r"db_blocks\[1\]: index 'note' is used twice"),
    ([_anchored(index="old")], r"db_blocks\[0\]: index 'old' already exists"),
    ([_anchored(start="corridor room 9")], r"\(note\): start_anchor 'corridor room 9' was not"),
    ([_anchored(mid="Exits")], r"\(note\): mid_anchor 'Exits' does not lie between"),
    ([{"index": "x", "description": "", "db_content": "a", "start_anchor": "The"}],
     r"\(x\): give either db_content or all three .* not both"),
    ([{"index": "x", "description": ""}], r"\(x\): give either .* not neither"),
    (["just text"], r"db_blocks\[0\] must be an object"),
])
def test_each_rejected_block_is_named(blocks, message):
  store = ExperienceStore()
  store.write("old", "kept")
  with pytest.raises(ToolArgumentError, match=message) as error:
    plan_compression({"summary": "s", "db_blocks": blocks}, WORKING, store)
  assert "the context is unchanged" in str(error.value)
  assert store.indices() == ["old"]


def test_all_problems_are_listed_at_once():
  with pytest.raises(ToolArgumentError) as error:
    plan_compression({"summary": "s", "db_blocks": [_anchored(index=""), _anchored(end="zzz")]},
                     WORKING, ExperienceStore())
  assert "db_blocks[0]" in str(error.value) and "db_blocks[1]" in str(error.value)


def test_summary_and_block_list_types_are_checked():
  with pytest.raises(ToolArgumentError, match="needs a string argument 'summary' \\(got "
                     "missing\\)"):
    plan_compression({"db_blocks": []}, WORKING, ExperienceStore())
  with pytest.raises(ToolArgumentError, match="db_blocks must be a list"):
    plan_compression({"summary": "s", "db_blocks": {"index": "a"}}, WORKING, ExperienceStore())


def test_summary_only_regime_archives_nothing():
  plan = plan_compression({"summary": "s", "db_blocks": [_anchored()]}, WORKING,
                          ExperienceStore(), archive=False)
  assert plan.blocks == () and plan.ignored_blocks == 1


def test_schemas_name_their_required_arguments():
  assert compress_schema()["parameters"]["required"] == ["summary"]
  assert "db_blocks" in compress_schema()["parameters"]["properties"]
  assert "db_blocks" not in compress_schema(archive=False)["parameters"]["properties"]
  assert read_schema()["parameters"]["required"] == ["index"]
  assert finish_schema()["parameters"]["required"] == ["answer"]


def test_string_argument_reports_the_wrong_type():
  with pytest.raises(ToolArgumentError, match="'index' \\(got a int\\)"):
    string_argument({"index": 3}, "index", "ReadExperience")
