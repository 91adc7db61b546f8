"""Parses an assistant turn into one tool call, or classifies why it is malformed.

Accepted forms: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (this project's
format) and the XML style `<function=Name><parameter=key>value</parameter></function>`, bare
or inside `<tool_call>` tags. Every turn is an attempted call: a turn without one is
malformed. `parse_turn` never raises, whatever the string.
"""

from __future__ import annotations

import dataclasses
import json
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
FORMAT_ERRORS = (NO_TOOL_CALL, TAG_MISMATCH, INVALID_JSON, MISSING_NAME, MISSING_ARGUMENTS,
                 INVALID_ARGUMENTS)

_CALL_TAGS = re.compile(re.escape(CALL_OPEN) + "|" + re.escape(CALL_CLOSE))
_FUNCTION = re.compile(re.escape(FUNCTION_OPEN) + r"([^>\n]*)>(.*?)" + re.escape(FUNCTION_CLOSE),
                       re.DOTALL)
_PARAMETER = re.compile(re.escape(PARAMETER_OPEN) + r"([^>\n]*)>(.*?)" +
                        re.escape(PARAMETER_CLOSE), re.DOTALL)
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


def _decode_json(text: str) -> tuple[Any, str | None]:
  try:
    return json.loads(text), None
  except json.JSONDecodeError as e:
    return None, f"{e.msg} at character {e.pos}"
  except (ValueError, RecursionError) as e:  # Oversized integers, pathological nesting.
    return None, type(e).__name__


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
  return ParsedTurn(ToolCall(name.strip(), arguments))


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
  match = _FUNCTION.search(text)
  if match is None:
    return _malformed(TAG_MISMATCH, f"Found no complete {FUNCTION_OPEN}Name>...{FUNCTION_CLOSE}.")
  name, body = match.group(1).strip(), match.group(2)
  if not name:
    return _malformed(MISSING_NAME, "The function tag has no name.")
  if body.count(PARAMETER_OPEN) != body.count(PARAMETER_CLOSE):
    return _malformed(TAG_MISMATCH, f"{PARAMETER_OPEN}...> and {PARAMETER_CLOSE} tags do not "
                      "match.")
  arguments: dict[str, Any] = {}
  for parameter in _PARAMETER.finditer(body):
    key = parameter.group(1).strip()
    if not key or key in arguments:
      return _malformed(INVALID_ARGUMENTS, f"Parameter name {key!r} is empty or repeated.")
    arguments[key] = _parameter_value(parameter.group(2))
  return ParsedTurn(ToolCall(name, arguments))


def _call_bodies(text: str) -> list[str] | None:
  """Bodies of the <tool_call> blocks, or None when the tags do not pair up."""
  bodies, open_at = [], None
  for tag in _CALL_TAGS.finditer(text):
    if tag.group() == CALL_OPEN:
      if open_at is not None:
        return None
      open_at = tag.end()
    else:
      if open_at is None:
        return None
      bodies.append(text[open_at:tag.start()])
      open_at = None
  return None if open_at is not None else bodies


def _parse_body(body: str) -> ParsedTurn:
  return _from_xml(body) if body.lstrip().startswith(FUNCTION_OPEN) else _from_json(body)


def parse_turn(text: str) -> ParsedTurn:
  """The first tool call in `text`, or the reason there is none. Never raises."""
  if not isinstance(text, str):
    return _malformed(NO_TOOL_CALL, "The turn is not text.")
  bodies = _call_bodies(text)
  if bodies is None:
    return _malformed(TAG_MISMATCH, f"{CALL_OPEN} and {CALL_CLOSE} tags do not match "
                      f"({text.count(CALL_OPEN)} opening, {text.count(CALL_CLOSE)} closing).")
  if bodies:
    first = _parse_body(bodies[0])
    return dataclasses.replace(first, extra_calls=len(bodies) - 1) if first.call else first
  if FUNCTION_OPEN in text or FUNCTION_CLOSE in text:
    first = _from_xml(text)
    extra = max(0, len(_FUNCTION.findall(text)) - 1)
    return dataclasses.replace(first, extra_calls=extra) if first.call else first
  return _malformed(NO_TOOL_CALL, "The turn contains no tool call.")
