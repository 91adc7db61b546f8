"""Tool-call parsing: both formats, every malformed class, no string makes it raise or makes it
accept text the tokenizer cannot encode, and its time is linear in the turn's length."""

import gc
import json
import time

import hypothesis
from hypothesis import strategies as st
import pytest

from memex_jax.agent import (FORMAT_ERRORS, INVALID_ARGUMENTS, INVALID_JSON, INVALID_TEXT,
                             MAX_NESTING, MISSING_ARGUMENTS, MISSING_NAME, NO_TOOL_CALL,
                             TAG_MISMATCH, ToolCall, parse_turn, text_problem)


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


@pytest.mark.parametrize("arguments", [
    '{"summary": "x\\ud800"}',  # the issue's minimal turn: a lone high surrogate escape
    '{"summary": "\\udc00 then text"}',  # a lone low surrogate
    '{"summary": "\\ude00\\ud83d"}',  # a pair in the wrong order is two lone halves
    '{"x\\udfff": "key"}',
    '{"db_blocks": [{"index": "a", "db_content": "\\ud800"}]}',
    '"{\\"summary\\": \\"\\\\ud800\\"}"',  # double-encoded arguments
])
def test_lone_surrogate_escapes_make_the_turn_malformed(arguments, smollm2_tokenizer):
  parsed = parse_turn(f'<tool_call>{{"name": "CompressExperience", "arguments": {arguments}}}'
                      "</tool_call>")
  assert parsed.error in (INVALID_TEXT, INVALID_ARGUMENTS)
  assert text_problem(parsed.detail) is None
  smollm2_tokenizer.encode(parsed.detail)  # The agent is shown why; that text must encode.


def test_surrogates_in_names_xml_and_raw_text_are_invalid_text():
  assert parse_turn('<tool_call>{"name": "F\\ud800", "arguments": {}}</tool_call>').error == \
      INVALID_TEXT
  assert parse_turn("<function=f><parameter=a>[\"\\udbff\"]</parameter></function>").error == \
      INVALID_TEXT
  raw = '<tool_call>{"name": "F", "arguments": {"a": "\ud800"}}</tool_call>'
  assert parse_turn(raw).error == INVALID_TEXT
  assert "lone surrogate \\ud800 at character" in parse_turn(raw).detail


def test_a_surrogate_pair_escape_is_one_character():
  parsed = parse_turn('<tool_call>{"name": "F", "arguments": {"a": "\\ud83d\\ude00"}}'
                      "</tool_call>")
  assert parsed.call == ToolCall("F", {"a": "\U0001f600"})


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400", "-1E+999"])
def test_non_finite_numbers_are_not_json(number):
  parsed = parse_turn(f'<tool_call>{{"name": "F", "arguments": {{"x": [1, {number}]}}}}'
                      "</tool_call>")
  assert parsed.error == INVALID_JSON and number.lstrip("-") in parsed.detail
  assert parse_turn('<tool_call>{"name": "F", "arguments": {"x": 1e300}}</tool_call>').call


def test_arguments_nest_at_most_max_nesting_levels():
  def call(depth):  # "arguments" is level 1; `depth` more arrays inside it
    return ('<tool_call>{"name": "execute", "arguments": {"command": "look", "x": ' +
            "[" * depth + "]" * depth + "}}</tool_call>")
  assert parse_turn(call(MAX_NESTING - 1)).call is not None
  assert parse_turn(call(MAX_NESTING)).error == INVALID_ARGUMENTS
  assert parse_turn(call(200)).error == INVALID_ARGUMENTS  # json decodes it; we refuse it


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


# Values json decodes but downstream code must never see: lone surrogate escapes, non-finite
# numbers, deep nesting; and raw lone surrogates (hypothesis leaves category Cs out by default).
_HOSTILE = st.sampled_from(['"', '"\\ud800"', '"a\\udfff', "\\ud83d\\ude00", "NaN", "Infinity",
                            "-Infinity", "1e999", "1.5", "[", "]", "{", "}", ":", ",", '"k"'])
_ANY_TEXT = st.text(st.characters(exclude_categories=[]), max_size=8)


def _leaves_and_depth(value, depth=0):
  if isinstance(value, dict):
    value = [*value, *value.values()]
  if isinstance(value, list):
    found = [_leaves_and_depth(item, depth + 1) for item in value]
    return [leaf for leaves, _ in found for leaf in leaves], max([depth] + [d for _, d in found])
  return [value], depth


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(st.lists(st.one_of(_HOSTILE, _ANY_TEXT), max_size=12).map("".join),
                  st.booleans())
def test_an_accepted_call_is_safe_downstream(value, wrap_in_xml):
  if wrap_in_xml:
    text = f"<function=F><parameter=a>{value}</parameter></function>"
  else:
    text = f'<tool_call>{{"name": "F", "arguments": {{"a": {value}}}}}</tool_call>'
  parsed = parse_turn(text)
  assert text_problem(parsed.detail) is None
  if parsed.call is not None:
    leaves, depth = _leaves_and_depth(parsed.call.arguments)
    assert depth < MAX_NESTING
    for leaf in leaves:
      assert not isinstance(leaf, str) or text_problem(leaf) is None
      assert not isinstance(leaf, float) or leaf - leaf == 0.0  # finite


_CALL = '<tool_call>{"name": "execute", "arguments": {"command": "look"}}</tool_call>'
# Turns that made a backtracking parser quadratic, and other long shapes, sized to n characters.
_ADVERSARIAL_TURNS = {
    "function openings": lambda n: "<function=" * (n // 10),
    "functions never closed": lambda n: "</function>" + "<function=a>" * (n // 12),
    "parameters never closed": lambda n: ("<function=f>" + "<parameter=a>" * (n // 13) +
                                          "</parameter>" + "</function>"),
    "paired tags": lambda n: "<function=f>" * (n // 23) + "</function>" * (n // 23),
    "calls per turn": lambda n: _CALL * (n // len(_CALL)),
    "one huge argument": lambda n: _CALL.replace("look", "x" * n),
    "one huge non-ASCII argument": lambda n: _CALL.replace("look", "é" * n),
    "json nesting": lambda n: "<tool_call>" + "[" * n + "</tool_call>",
}


def _seconds_per_parse(text: str) -> float:
  """CPU seconds of one parse: this thread's CPU time (waiting for a core on a busy machine does
  not count), with the garbage collector off as in timeit (a full collection walks every object
  of the process, a cost unrelated to the turn)."""
  gc.disable()
  try:
    start = time.thread_time()
    parse_turn(text)
    return time.thread_time() - start
  finally:
    gc.enable()


@pytest.mark.parametrize("shape", sorted(_ADVERSARIAL_TURNS))
def test_parse_time_is_linear_in_the_turn_length(shape):
  make = _ADVERSARIAL_TURNS[shape]
  small, large = make(100_000), make(1_000_000)
  assert 9 * len(small) <= len(large) <= 11 * len(small)
  # The fastest of 20 single parses of each size, interleaved so that both meet the same load.
  rounds = [(_seconds_per_parse(small), _seconds_per_parse(large)) for _ in range(20)]
  ratio = min(r[1] for r in rounds) / min(r[0] for r in rounds)
  # 10x the text: ~10x the time when linear, ~100x when quadratic.
  assert ratio < 20, f"{shape}: 10x the text took {ratio:.1f}x the time"
