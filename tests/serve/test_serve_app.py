"""`python -m memex_jax.serve` as a real subprocess on loopback, on real SmolLM2 weights."""

import json
import urllib.error
import urllib.request

from memex_jax.agent.chat import ChatRenderer, Message
from memex_jax.sampling import complete

MODEL = "smollm2-135m-instruct"
QUESTION = "Name three colours of the rainbow."


def _call(url, body, method="POST"):
  """(status, decoded JSON) of one request; `body` bytes are sent as they are."""
  data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
  request = urllib.request.Request(url, data, {"Content-Type": "application/json"},
                                   method=method)
  try:
    with urllib.request.urlopen(request, timeout=300) as response:
      return response.status, json.loads(response.read())
  except urllib.error.HTTPError as e:
    return e.code, json.loads(e.read())


def _chat(server, **kw):
  body = {"model": MODEL, "messages": [{"role": "user", "content": QUESTION}],
          "temperature": 0, **kw}
  return _call(f"{server}/chat/completions", body)


def _local(sampler, max_tokens):
  """(text, prompt ids, sampled ids) of the same request on the local sampler."""
  renderer = ChatRenderer(sampler.tokenizer)
  prompt = renderer.prompt_ids([Message("user", QUESTION)])
  (turn,) = complete(sampler, [prompt], [max_tokens])
  return renderer.assistant_text(turn.ids), prompt, turn.ids


def test_models_lists_the_served_model(smollm2_server):
  status, body = _call(f"{smollm2_server}/models", None, method="GET")
  assert status == 200 and [m["id"] for m in body["data"]] == [MODEL]
  assert body["data"][0]["context_window"] == 256


def test_greedy_reply_and_usage_equal_the_local_sampler(smollm2_server, smollm2_sampler):
  status, body = _chat(smollm2_server, max_tokens=5)
  assert status == 200, body
  text, prompt, ids = _local(smollm2_sampler, 5)
  choice = body["choices"][0]
  assert choice["message"] == {"role": "assistant", "content": text}
  assert choice["finish_reason"] == "length"
  assert body["usage"] == {"prompt_tokens": len(prompt), "completion_tokens": len(ids),
                           "total_tokens": len(prompt) + len(ids)}
  assert body["model"] == MODEL and body["object"] == "chat.completion"


def test_stop_strings_cut_the_reply(smollm2_server, smollm2_sampler):
  text, _, _ = _local(smollm2_sampler, 5)
  stop = text.split()[1]  # the reply's second word
  status, body = _chat(smollm2_server, max_tokens=5, stop=[stop])
  assert status == 200, body
  assert body["choices"][0]["message"]["content"] == text[:text.index(stop)]
  assert body["choices"][0]["finish_reason"] == "stop"
  assert 1 <= body["usage"]["completion_tokens"] <= 5


BAD_REQUESTS = [  # (body, status, error code, error param)
    (b'{"model": "smollm2-135m-instruct", "messages": [', 400, None, None),
    ({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}, 404,
     "model_not_found", "model"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "word " * 300}]}, 400,
     "context_length_exceeded", "messages"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4096}, 400,
     "context_length_exceeded", "max_tokens"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "temperature": -1}, 400,
     None, "temperature"),
]


def test_bad_requests_get_openai_errors_and_the_server_keeps_serving(smollm2_server):
  for send, status, code, param in BAD_REQUESTS:
    got, body = _call(f"{smollm2_server}/chat/completions", send)
    assert got == status, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", code,
                                                              param)
    assert error["message"]
  ok, reply = _chat(smollm2_server, max_tokens=1)
  assert ok == 200 and reply["usage"]["completion_tokens"] == 1


def test_unknown_routes_and_methods(smollm2_server):
  assert _call(f"{smollm2_server}/completions", {})[0] == 404
  status, body = _call(f"{smollm2_server}/chat/completions", None, method="GET")
  assert status == 405 and body["error"]["type"] == "invalid_request_error"
