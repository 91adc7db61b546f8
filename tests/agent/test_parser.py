"""Tool-call parsing: both formats, every malformed class, and no string makes it raise."""

import json

import hypothesis
from hypothesis import strategies as st
import pytest

from memex_jax.agent import (FORMAT_ERRORS, INVALID_ARGUMENTS, INVALID_JSON, MISSING_ARGUMENTS,
                             MISSING_NAME, NO_TOOL_CALL, TAG_MISMATCH, ToolCall, parse_turn)


def test_json_call_after_thinking():
  parsed = parse_turn('I should look first.\n<tool_call>\n{"name": "execute", "arguments": '
                      '{"command": "look"}}\n</tool_call><|im_end|>')
  assert parsed.call == ToolCall("execute", {"command": "look"})
  assert not parsed.malformed and parsed.error is None and parsed.extra_calls == 0


def test_double_encoded_arguments_are_accepted():
  parsed = parse_turn('<tool_call>{"name": "Finish", "arguments": "{\\"answer\\": \\"7\\"}"}'
                      '</tool_call>')
  assert parsed.call == ToolCall("Finish", {"answer": "7"})


def test_xml_call_inside_and_outside_tool_call_tags():
  xml = ("<function=CompressExperience>\n<parameter=summary>\nRead the note.\n</parameter>\n"
         '<parameter=db_blocks>\n[{"index": "note", "db_content": "QXR"}]\n</parameter>\n'
         "</function>")
  expected = ToolCall("CompressExperience", {
      "summary": "Read the note.", "db_blocks": [{"index": "note", "db_content": "QXR"}]})
  assert parse_turn(f"thinking...\n{xml}").call == expected
  assert parse_turn(f"<tool_call>\n{xml}\n</tool_call>").call == expected


def test_xml_string_values_stay_strings():
  parsed = parse_turn("<function=execute><parameter=command>42</parameter></function>")
  assert parsed.call == ToolCall("execute", {"command": "42"})
  parsed = parse_turn("<function=execute><parameter=command>[not json</parameter></function>")
  assert parsed.call.arguments == {"command": "[not json"}


def test_only_the_first_call_runs_and_the_rest_are_counted():
  call = '<tool_call>{"name": "a", "arguments": {}}</tool_call>'
  parsed = parse_turn(call + call.replace('"a"', '"b"') + call)
  assert parsed.call.name == "a" and parsed.extra_calls == 2


@pytest.mark.parametrize("text, error", [
    ("I will just think this turn.", NO_TOOL_CALL),
    ("", NO_TOOL_CALL),
    ('<tool_call>{"name": "a", "arguments": {}}', TAG_MISMATCH),
    ('{"name": "a", "arguments": {}}</tool_call>', TAG_MISMATCH),
    ("<tool_call><tool_call>{}</tool_call></tool_call>", TAG_MISMATCH),
    ("<function=execute><parameter=command>look</parameter>", TAG_MISMATCH),
    ("<function=execute><parameter=command>look</function>", TAG_MISMATCH),
    ('<tool_call>{"name": "a", "arguments": {}</tool_call>', INVALID_JSON),
    ("<tool_call>[1, 2]</tool_call>", INVALID_JSON),
    ('<tool_call>{"arguments": {}}</tool_call>', MISSING_NAME),
    ('<tool_call>{"name": "  ", "arguments": {}}</tool_call>', MISSING_NAME),
    ("<function=><parameter=a>1</parameter></function>", MISSING_NAME),
    ('<tool_call>{"name": "execute"}</tool_call>', MISSING_ARGUMENTS),
    ('<tool_call>{"name": "execute", "arguments": [1]}</tool_call>', INVALID_ARGUMENTS),
    ("<function=f><parameter=a>1</parameter><parameter=a>2</parameter></function>",
     INVALID_ARGUMENTS),
])
def test_malformed_turns_are_classified(text, error):
  parsed = parse_turn(text)
  assert parsed.malformed and parsed.call is None
  assert parsed.error == error
  assert "<tool_call>" in parsed.detail  # Every error tells the agent the right format.


def test_pathological_json_does_not_raise():
  assert parse_turn("<tool_call>" + "[" * 100_000 + "</tool_call>").error == INVALID_JSON
  assert parse_turn('<tool_call>{"name": "a", "arguments": {"n": ' + "9" * 5000 +
                    "}}</tool_call>").error == INVALID_JSON


_PIECES = st.sampled_from(["<tool_call>", "</tool_call>", "<function=", "</function>",
                           "<parameter=", "</parameter>", ">", "{", "}", "[", "]", '"', ":",
                           ",", '"name"', '"arguments"', "\n", "null", "1"])


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(st.one_of(st.text(), st.lists(st.one_of(_PIECES, st.text(max_size=5)))
                            .map("".join)))
def test_parser_never_raises_and_is_consistent(text):
  parsed = parse_turn(text)
  assert (parsed.call is None) == (parsed.error in FORMAT_ERRORS)
  if parsed.call is not None:
    assert isinstance(parsed.call.name, str) and parsed.call.name
    assert isinstance(parsed.call.arguments, dict)
    parsed.call.signature()


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8)


@hypothesis.settings(max_examples=100, deadline=None)
@hypothesis.given(st.text(min_size=1).filter(lambda s: s.strip() == s and s),
                  st.dictionaries(st.text(), _JSON_VALUES, max_size=4), st.text())
def test_any_rendered_json_call_parses_back(name, arguments, thinking):
  hypothesis.assume("<tool_call>" not in thinking and "</tool_call>" not in thinking)
  hypothesis.assume("<function=" not in thinking and "</function>" not in thinking)
  payload = json.dumps({"name": name, "arguments": arguments})
  parsed = parse_turn(f"{thinking}<tool_call>\n{payload}\n</tool_call>")
  assert parsed.call == ToolCall(name, arguments)
