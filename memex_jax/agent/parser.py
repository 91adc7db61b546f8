"""Parses an assistant turn into one tool call, or classifies why it is malformed.

Accepted forms: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (this project's
format) and the XML style `<function=Name><parameter=key>value</parameter></function>`, bare
or inside `<tool_call>` tags (the first `<function=` opens the call, the first `</function>`
after it closes it). Every turn is an attempted call: a turn without one is malformed.

This is where model text enters the system, so a call it accepts is safe for everything
downstream (memory tools, tokenizer, renderer, env). The decisions, made here once:
- Text must be Unicode text. A lone UTF-16 surrogate, raw or written as a JSON escape (the six
  characters `\\ud800`, which `json` accepts and the tokenizer cannot encode), makes the turn
  malformed (`invalid_text`); a surrogate pair escape is one character and is fine. Control
  characters, NUL and bidirectional marks are text: they pass through as written.
- Numbers must be JSON (RFC 8259): `NaN`, `Infinity`, `-Infinity` and literals that overflow a
  float (`1e400`) make the turn `invalid_json`.
- Arguments nest at most `MAX_NESTING` arrays/objects deep (the tools need 3), so no consumer
  recurses deeply.
`parse_turn` never raises, whatever the string, and runs in time linear in its length: tags
are found by forward scans, never by backtracking patterns.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
FUNCTION_OPEN, FUNCTION_CLOSE = "<function=", "</function>"
PARAMETER_OPEN, PARAMETER_CLOSE = "<parameter=", "</parameter>"

# Malformed-output classes (the format penalty counts any of them).
NO_TOOL_CALL = "no_tool_call"
TAG_MISMATCH = "tag_mismatch"
INVALID_JSON = "invalid_json"
MISSING_NAME = "missing_name"
MISSING_ARGUMENTS = "missing_arguments"
INVALID_ARGUMENTS = "invalid_arguments"
INVALID_TEXT = "invalid_text"
FORMAT_ERRORS = (NO_TOOL_CALL, TAG_MISMATCH, INVALID_JSON, MISSING_NAME, MISSING_ARGUMENTS,
                 INVALID_ARGUMENTS, INVALID_TEXT)

MAX_NESTING = 16  # arrays/objects inside "arguments"

_CALL_TAGS = re.compile(re.escape(CALL_OPEN) + "|" + re.escape(CALL_CLOSE))
# Any surrogate code point in a str is unencodable (UTF-8 has none); json already turns an
# escaped pair into the one character it stands for.
_SURROGATE = re.compile("[\\ud800-\\udfff]")
_FORMAT_HINT = ('Call exactly one tool per turn as <tool_call>{"name": "<tool>", "arguments": '
                '{...}}</tool_call>.')


@dataclasses.dataclass(frozen=True)
class ToolCall:
  """A well-formed call.

  Attributes:
    name: the tool's name (not checked against the tool set here).
    arguments: the decoded arguments object.
  """

  name: str
  arguments: dict[str, Any]

  def signature(self) -> str:
    """Canonical (name, arguments) key for spotting repeated calls."""
    return json.dumps([self.name, self.arguments], sort_keys=True, ensure_ascii=False,
                      default=repr)


@dataclasses.dataclass(frozen=True)
class ParsedTurn:
  """The outcome of parsing one assistant turn.

  Attributes:
    call: the first well-formed call, or None.
    error: one of FORMAT_ERRORS when `call` is None.
    detail: what went wrong, phrased for the agent (empty on success).
    extra_calls: further calls in the same turn, which are not executed.
  """

  call: ToolCall | None
  error: str | None = None
  detail: str = ""
  extra_calls: int = 0

  @property
  def malformed(self) -> bool:
    return self.call is None


def _malformed(error: str, detail: str) -> ParsedTurn:
  return ParsedTurn(None, error, f"{detail} {_FORMAT_HINT}")


class _NotJson(ValueError):
  """A value `json` would decode that RFC 8259 does not allow (or a float cannot hold)."""


def _no_constant(name: str) -> Any:
  raise _NotJson(f"{name} is not a JSON number")


def _finite(literal: str) -> float:
  value = float(literal)
  if not math.isfinite(value):
    raise _NotJson(f"the number {literal[:32]} is out of range")
  return value


def _decode_json(text: str) -> tuple[Any, str | None]:
  try:
    return json.loads(text, parse_constant=_no_constant, parse_float=_finite), None
  except _NotJson as e:
    return None, str(e)
  except json.JSONDecodeError as e:
    return None, f"{e.msg} at character {e.pos}"
  except (ValueError, RecursionError) as e:  # Oversized integers, pathological nesting.
    return None, type(e).__name__


def text_problem(text: str) -> str | None:
  """Why `text` is not Unicode text a tokenizer can encode (a lone surrogate), or None."""
  # isascii is a flag lookup; the scan makes no copy of a long text (encoding it would).
  found = None if text.isascii() else _SURROGATE.search(text)
  if found is None:
    return None
  return f"it holds a lone surrogate \\u{ord(found.group()):04x} at character {found.start()}"


def _not_text(what: str, problem: str) -> ParsedTurn:
  return _malformed(INVALID_TEXT, f"{what} is not text: {problem}; write the character itself.")


def _arguments_problem(arguments: dict[str, Any]) -> ParsedTurn | None:
  """A malformed turn when decoded arguments nest too deeply or hold a string that is not text."""
  pending: list[tuple[Any, int]] = [(arguments, 1)]
  while pending:
    value, depth = pending.pop()
    if isinstance(value, str):
      problem = text_problem(value)
      if problem is not None:
        return _not_text("A string in the arguments", problem)
    elif isinstance(value, (dict, list)):
      if depth > MAX_NESTING:
        return _malformed(INVALID_ARGUMENTS, f"The arguments nest deeper than {MAX_NESTING} "
                          "levels.")
      items = [*value, *value.values()] if isinstance(value, dict) else value
      pending.extend((item, depth + 1) for item in items)
  return None


def _checked(name: str, arguments: dict[str, Any]) -> ParsedTurn:
  """The call, unless its name or arguments are unsafe downstream."""
  problem = text_problem(name)
  if problem is not None:
    return _not_text("The tool name", problem)
  return _arguments_problem(arguments) or ParsedTurn(ToolCall(name, arguments))


def _from_json(body: str) -> ParsedTurn:
  payload, problem = _decode_json(body.strip())
  if problem is not None:
    return _malformed(INVALID_JSON, f"The text inside <tool_call> is not valid JSON: {problem}.")
  if not isinstance(payload, dict):
    return _malformed(INVALID_JSON, "The text inside <tool_call> must be a JSON object, got "
                      f"a {type(payload).__name__}.")
  name = payload.get("name")
  if not isinstance(name, str) or not name.strip():
    return _malformed(MISSING_NAME, 'The tool call has no "name" string.')
  if "arguments" not in payload:
    return _malformed(MISSING_ARGUMENTS, 'The tool call has no "arguments" object.')
  arguments = payload["arguments"]
  if isinstance(arguments, str):  # Some models double-encode the arguments.
    arguments, _ = _decode_json(arguments)
  if not isinstance(arguments, dict):
    return _malformed(INVALID_ARGUMENTS, '"arguments" must be a JSON object.')
  return _checked(name.strip(), arguments)


def _tagged(text: str, start: int, open_tag: str,
            close_tag: str) -> tuple[str, str, int] | str:
  """The first `open_tag`NAME>BODY`close_tag` from `start`: (name, body, end), or why not.

  A forward scan: each search resumes where the previous one stopped.
  """
  at = text.find(open_tag, start)
  name_end = text.find(">", at + len(open_tag)) if at != -1 else -1
  close = text.find(close_tag, name_end + 1) if name_end != -1 else -1
  if close == -1:
    return f"Found no complete {open_tag}Name>...{close_tag}."
  name = text[at + len(open_tag):name_end]
  if "\n" in name:
    return f"The {open_tag}...> tag is not closed on its line."
  return name.strip(), text[name_end + 1:close], close + len(close_tag)


def _parameter_value(raw: str) -> Any:
  value = raw[1:] if raw.startswith("\n") else raw
  value = value[:-1] if value.endswith("\n") else value
  if value.lstrip()[:1] in ("[", "{"):  # Lists and objects (e.g. db_blocks) travel as JSON.
    decoded, problem = _decode_json(value)
    if problem is None:
      return decoded
  return value


def _from_xml(text: str) -> ParsedTurn:
  if text.count(FUNCTION_OPEN) != text.count(FUNCTION_CLOSE):
    return _malformed(TAG_MISMATCH, f"{FUNCTION_OPEN}...> and {FUNCTION_CLOSE} tags do not match.")
  function = _tagged(text, 0, FUNCTION_OPEN, FUNCTION_CLOSE)
  if isinstance(function, str):
    return _malformed(TAG_MISMATCH, function)
  name, body, _ = function
  if not name:
    return _malformed(MISSING_NAME, "The function tag has no name.")
  if body.count(PARAMETER_OPEN) != body.count(PARAMETER_CLOSE):
    return _malformed(TAG_MISMATCH, f"{PARAMETER_OPEN}...> and {PARAMETER_CLOSE} tags do not "
                      "match.")
  arguments: dict[str, Any] = {}
  at = body.find(PARAMETER_OPEN)
  while at != -1:
    parameter = _tagged(body, at, PARAMETER_OPEN, PARAMETER_CLOSE)
    if isinstance(parameter, str):
      return _malformed(TAG_MISMATCH, parameter)
    key, raw, end = parameter
    if not key or key in arguments:
      return _malformed(INVALID_ARGUMENTS, f"Parameter name {key!r} is empty or repeated.")
    arguments[key] = _parameter_value(raw)
    at = body.find(PARAMETER_OPEN, end)
  return _checked(name, arguments)


def _call_blocks(text: str) -> tuple[str | None, int] | None:
  """(body of the first <tool_call> block, number of blocks), or None when the tags do not pair
  up. Only the first body is cut out: a turn of many calls costs no copy of the others."""
  first, count, open_at = None, 0, None
  for tag in _CALL_TAGS.finditer(text):
    if tag.group() == CALL_OPEN:
      if open_at is not None:
        return None
      open_at = tag.end()
    else:
      if open_at is None:
        return None
      if first is None:
        first = text[open_at:tag.start()]
      count, open_at = count + 1, None
  return None if open_at is not None else (first, count)


def _parse_body(body: str) -> ParsedTurn:
  return _from_xml(body) if body.lstrip().startswith(FUNCTION_OPEN) else _from_json(body)


def parse_turn(text: str) -> ParsedTurn:
  """The first tool call in `text`, or the reason there is none. Never raises."""
  if not isinstance(text, str):
    return _malformed(NO_TOOL_CALL, "The turn is not text.")
  problem = text_problem(text)
  if problem is not None:
    return _not_text("The turn", problem)
  blocks = _call_blocks(text)
  if blocks is None:
    return _malformed(TAG_MISMATCH, f"{CALL_OPEN} and {CALL_CLOSE} tags do not match "
                      f"({text.count(CALL_OPEN)} opening, {text.count(CALL_CLOSE)} closing).")
  body, count = blocks
  if body is not None:
    first = _parse_body(body)
    return dataclasses.replace(first, extra_calls=count - 1) if first.call else first
  if FUNCTION_OPEN in text or FUNCTION_CLOSE in text:
    first = _from_xml(text)  # Only a call whose tags pair up: one per closing tag.
    return dataclasses.replace(first, extra_calls=text.count(FUNCTION_CLOSE) - 1) \
        if first.call else first
  return _malformed(NO_TOOL_CALL, "The turn contains no tool call.")
