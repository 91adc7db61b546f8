"""The chat-completions wire format: validation, the project's tool format, replies."""

import json

import pytest

from memex_jax.agent.chat import ChatRenderer, Message
from memex_jax.agent.parser import parse_turn
from memex_jax.serve import protocol

TOOL = {"type": "function", "function": {
    "name": "execute", "description": "Run one action.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}


def _body(**kw):
  return {"model": "m", "messages": [{"role": "user", "content": "hi"}], **kw}


def test_defaults_and_fields():
  request = protocol.parse_request(_body(max_tokens=5, temperature=0, top_p=0.5, stop="\n"))
  assert request.messages == (Message("user", "hi"),)
  assert (request.max_tokens, request.temperature, request.top_p) == (5, 0.0, 0.5)
  assert request.stop == ("\n",) and not request.parse_tools
  plain = protocol.parse_request(_body())
  assert (plain.max_tokens, plain.temperature, plain.top_p, plain.stop) == (None, 1.0, 1.0, ())
  newer = protocol.parse_request(_body(max_completion_tokens=3))
  assert newer.max_tokens == 3


@pytest.mark.parametrize("body, param", [
    (["not", "an", "object"], None),
    ({"messages": [{"role": "user", "content": "x"}]}, "model"),
    (_body(messages=[]), "messages"),
    (_body(messages=[{"role": "robot", "content": "x"}]), "messages[0].role"),
    (_body(messages=[{"role": "user", "content": [{"type": "image_url"}]}]),
     "messages[0].content"),
    (_body(max_tokens=0), "max_tokens"),
    (_body(max_tokens="7"), "max_tokens"),
    (_body(temperature=3), "temperature"),
    (_body(top_p=True), "top_p"),
    (_body(stop=["a", "b", "c", "d", "e"]), "stop"),
    (_body(stream=True), "stream"),
    (_body(n=2), "n"),
    (_body(tools=[{"type": "retrieval"}]), "tools"),
])
def test_bad_requests_name_the_field(body, param):
  with pytest.raises(protocol.ApiError) as error:
    protocol.parse_request(body)
  assert error.value.status == 400 and error.value.param == param
  assert error.value.body()["error"]["type"] == "invalid_request_error"


def test_tool_messages_use_the_project_format(smollm2_tokenizer):
  request = protocol.parse_request(_body(tools=[TOOL], messages=[
      {"role": "developer", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Open "}, {"type": "text",
                                                                      "text": "the door."}]},
      {"role": "assistant", "content": None, "tool_calls": [{
          "id": "call_1", "type": "function",
          "function": {"name": "execute", "arguments": '{"command": "open door"}'}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "The door opens."}]))
  system, user, assistant, tool = request.messages
  assert system.role == "system" and system.content.startswith("Be brief.\n\n<tools>\n")
  assert json.loads(system.content.split("\n")[3]) == TOOL
  assert user == Message("user", "Open the door.")
  call = parse_turn(assistant.content).call
  assert (call.name, call.arguments) == ("execute", {"command": "open door"})
  ids = ChatRenderer(smollm2_tokenizer).prompt_ids(request.messages)
  text = smollm2_tokenizer.decode(ids)
  assert "<tool_response>\nThe door opens.\n</tool_response>" in text
  assert text.endswith("<|im_start|>assistant\n")
  assert request.parse_tools


def test_tools_without_a_system_message_get_one():
  request = protocol.parse_request(_body(tools=[TOOL]))
  assert request.messages[0].role == "system" and request.messages[0].content.startswith("<tools>")


def test_bad_tool_call_arguments():
  bad = {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}
  with pytest.raises(protocol.ApiError, match="not valid JSON"):
    protocol.parse_request(_body(messages=[bad]))


def test_cut_at_stops_takes_the_earliest():
  assert protocol.cut_at_stops("a.b;c", [";", "."]) == ("a", True)
  assert protocol.cut_at_stops("abc", ["x"]) == ("abc", False)


def test_reply_parses_tool_calls_only_when_tools_were_declared():
  text = 'Let me look.\n<tool_call>\n{"name": "execute", "arguments": {"command": "look"}}\n' \
         '</tool_call>'
  with_tools = protocol.parse_request(_body(tools=[TOOL]))
  body = protocol.completion_body(with_tools, text, "stop", 10, 4)
  choice = body["choices"][0]
  assert choice["finish_reason"] == "tool_calls"
  assert choice["message"]["content"] == "Let me look."
  (call,) = choice["message"]["tool_calls"]
  assert call["function"]["name"] == "execute"
  assert json.loads(call["function"]["arguments"]) == {"command": "look"}
  assert body["usage"] == {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}
  plain = protocol.completion_body(protocol.parse_request(_body()), text, "stop", 10, 4)
  assert plain["choices"][0]["message"] == {"role": "assistant", "content": text}
  malformed = protocol.completion_body(with_tools, "<tool_call>{oops</tool_call>", "stop", 1, 1)
  assert malformed["choices"][0]["finish_reason"] == "stop"
  assert "tool_calls" not in malformed["choices"][0]["message"]
