"""The OpenAI chat-completions wire format, mapped onto the project's ChatML tool format.

Requests are validated here into a `ChatRequest` (or an `ApiError` carrying the OpenAI error
object and its HTTP status); replies are built here from a sampled turn. Messages are rendered
by the agent's `ChatRenderer`, never by a model's own chat template: `tool` messages become
`<tool_response>` user messages, an assistant's `tool_calls` become `<tool_call>` JSON blocks,
and the request's `tools` are appended to the system message as the agent's `<tools>` block. A
reply is parsed into `tool_calls` only when the request declared tools; otherwise its text is
returned verbatim (what the Memex agent loop parses itself).
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from typing import Any, Sequence

from memex_jax.agent.chat import Message, tools_block
from memex_jax.agent.parser import CALL_CLOSE, CALL_OPEN, parse_turn

MAX_STOPS = 4  # as the OpenAI API allows


class ApiError(Exception):
  """A request the server refuses, as an OpenAI error object with its HTTP status."""

  def __init__(self, status: int, message: str, param: str | None = None,
               code: str | None = None, kind: str = "invalid_request_error"):
    super().__init__(message)
    self.status, self.message, self.param, self.code, self.kind = (status, message, param, code,
                                                                   kind)

  def body(self) -> dict[str, Any]:
    return {"error": {"message": self.message, "type": self.kind, "param": self.param,
                      "code": self.code}}


@dataclasses.dataclass(frozen=True)
class ChatRequest:
  """A validated chat-completions request.

  Attributes:
    model: the model name the client asked for.
    messages: the conversation in the project's roles (tools folded into the system message).
    max_tokens: cap on sampled tokens; None means as many as the context window leaves.
    temperature: 0 for greedy.
    top_p: nucleus mass.
    stop: extra stop strings; the reply is cut before the first one.
    parse_tools: the request declared tools, so a reply's tool call comes back as `tool_calls`.
  """

  model: str
  messages: tuple[Message, ...]
  max_tokens: int | None
  temperature: float
  top_p: float
  stop: tuple[str, ...]
  parse_tools: bool


def _invalid(message: str, param: str | None = None) -> ApiError:
  return ApiError(400, message, param=param)


def _number(body: dict[str, Any], name: str, default: float, low: float, high: float) -> float:
  value = body.get(name)
  if value is None:
    return default
  if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
    raise _invalid(f"'{name}' must be a number in [{low}, {high}], got {value!r}", name)
  return float(value)


def _text(content: Any, where: str) -> str:
  """A message's content: a string, null, or a list of text parts."""
  if content is None:
    return ""
  if isinstance(content, str):
    return content
  if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" and
                                       isinstance(p.get("text"), str) for p in content):
    return "".join(p["text"] for p in content)
  raise _invalid(f"{where}.content must be a string or a list of text parts", f"{where}.content")


def _call_text(call: Any, where: str) -> str:
  """An OpenAI tool call as the project's `<tool_call>` block."""
  function = call.get("function") if isinstance(call, dict) else None
  if not isinstance(function, dict) or not isinstance(function.get("name"), str):
    raise _invalid(f"{where} must be {{'type': 'function', 'function': {{'name', 'arguments'}}}}",
                   where)
  arguments = function.get("arguments", "{}")
  try:
    arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
  except json.JSONDecodeError:
    raise _invalid(f"{where}.function.arguments is not valid JSON", where) from None
  payload = json.dumps({"name": function["name"], "arguments": arguments}, ensure_ascii=False)
  return f"{CALL_OPEN}\n{payload}\n{CALL_CLOSE}"


def _message(raw: Any, index: int) -> Message:
  where = f"messages[{index}]"
  if not isinstance(raw, dict):
    raise _invalid(f"{where} must be an object", where)
  role = raw.get("role")
  if role == "developer":  # the newer name of the system role
    role = "system"
  if role not in ("system", "user", "assistant", "tool"):
    raise _invalid(f"{where}.role must be system, user, assistant or tool, got {role!r}",
                   f"{where}.role")
  content = _text(raw.get("content"), where)
  calls = raw.get("tool_calls") or []
  if role == "assistant" and calls:
    if not isinstance(calls, list):
      raise _invalid(f"{where}.tool_calls must be a list", f"{where}.tool_calls")
    blocks = [_call_text(call, f"{where}.tool_calls[{i}]") for i, call in enumerate(calls)]
    content = "\n".join(([content] if content else []) + blocks)
  return Message(role, content)


def _with_tools(messages: list[Message], tools: Any) -> list[Message]:
  if not isinstance(tools, list) or not all(
      isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("function"), dict)
      for t in tools):
    raise _invalid("'tools' must be a list of {'type': 'function', 'function': {...}}", "tools")
  block = tools_block([t["function"] for t in tools])
  if messages and messages[0].role == "system":
    return [Message("system", f"{messages[0].content}\n\n{block}")] + messages[1:]
  return [Message("system", block)] + messages


def parse_request(body: Any) -> ChatRequest:
  """Validates a decoded request body; raises ApiError (400) naming the offending field."""
  if not isinstance(body, dict):
    raise _invalid("the request body must be a JSON object")
  model = body.get("model")
  if not isinstance(model, str) or not model:
    raise _invalid("'model' is required", "model")
  if body.get("stream"):
    raise _invalid("streaming is not supported by this server; send stream=false", "stream")
  if body.get("n", 1) != 1:
    raise _invalid("only n=1 is supported", "n")
  raw = body.get("messages")
  if not isinstance(raw, list) or not raw:
    raise _invalid("'messages' must be a non-empty list", "messages")
  messages = [_message(m, i) for i, m in enumerate(raw)]
  tools = body.get("tools")
  if tools:
    messages = _with_tools(messages, tools)
  max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
  if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                 or max_tokens < 1):
    raise _invalid(f"'max_tokens' must be a positive integer, got {max_tokens!r}", "max_tokens")
  stop = body.get("stop")
  stop = [stop] if isinstance(stop, str) else (stop or [])
  if (not isinstance(stop, list) or len(stop) > MAX_STOPS or
      not all(isinstance(s, str) and s for s in stop)):
    raise _invalid(f"'stop' must be a string or a list of at most {MAX_STOPS} non-empty strings",
                   "stop")
  return ChatRequest(
      model=model, messages=tuple(messages), max_tokens=max_tokens,
      temperature=_number(body, "temperature", 1.0, 0.0, 2.0),
      top_p=_number(body, "top_p", 1.0, 0.0, 1.0), stop=tuple(stop), parse_tools=bool(tools))


def cut_at_stops(text: str, stops: Sequence[str]) -> tuple[str, bool]:
  """`text` before the earliest of `stops`, and whether one occurred."""
  cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
  return (text, False) if cut < 0 else (text[:cut], True)


def _tool_calls(text: str) -> tuple[str, list[dict[str, Any]]] | None:
  """(content before the call, [the call in OpenAI form]) when `text` holds a well-formed call."""
  parsed = parse_turn(text)
  if parsed.call is None:
    return None
  call = {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
          "function": {"name": parsed.call.name,
                       "arguments": json.dumps(parsed.call.arguments, ensure_ascii=False)}}
  return text.split(CALL_OPEN, 1)[0].strip(), [call]


def completion_body(request: ChatRequest, text: str, finish_reason: str, prompt_tokens: int,
                    completion_tokens: int) -> dict[str, Any]:
  """The chat.completion object for one sampled reply."""
  message: dict[str, Any] = {"role": "assistant", "content": text}
  calls = _tool_calls(text) if request.parse_tools else None
  if calls is not None:
    message = {"role": "assistant", "content": calls[0] or None, "tool_calls": calls[1]}
    finish_reason = "tool_calls"
  return {
      "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion",
      "created": int(time.time()), "model": request.model,
      "choices": [{"index": 0, "message": message, "finish_reason": finish_reason,
                   "logprobs": None}],
      "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens}}
