"""The HTTP executor against the real server (SmolLM2, loopback) and a tiny scripted endpoint."""

import http.server
import json
import threading
import urllib.request

import pytest

from memex_jax.harness import executor as executor_lib
from memex_jax.harness import http_executor
from memex_jax.harness.experience import ExperienceUnit

MODEL = "smollm2-135m-instruct"
HINT = ExperienceUnit("Two cats have 8 legs: count 4 per cat.", "skill", "t0")


def _tasks(records, max_tokens=4):
  return [executor_lib.ExecutorTask(r, max_tokens) for r in records]


def _health(url):
  with urllib.request.urlopen(url.removesuffix("/v1") + "/health", timeout=30) as response:
    return json.loads(response.read())


def test_greedy_responses_equal_the_local_sampler(smollm2_server, smollm2_sampler,
                                                  counting_records):
  remote = http_executor.HttpExecutor(http_executor.EndpointConfig(smollm2_server, MODEL))
  local = executor_lib.SamplerExecutor(smollm2_sampler)
  experiences = [[HINT], [], [HINT]]
  over_http = remote.solve(_tasks(counting_records), experiences)
  in_process = local.solve(_tasks(counting_records), experiences)
  assert over_http == in_process  # text, score, detail and token counts
  assert all(r.completion_tokens >= 1 and not r.error for r in over_http)


def test_concurrent_requests_are_all_answered_in_shared_rounds(smollm2_server, counting_record):
  before = _health(smollm2_server)
  remote = http_executor.HttpExecutor(http_executor.EndpointConfig(
      smollm2_server, MODEL, max_concurrency=8))
  records = [counting_record(10 + i, f"I have {i + 1} apples. How many objects do I have?",
                             str(i + 1)) for i in range(8)]
  results = remote.solve(_tasks(records, max_tokens=2), [[]] * len(records))
  after = _health(smollm2_server)
  assert all(not r.error and r.completion_tokens >= 1 for r in results)
  assert after["batched"] - before["batched"] == len(records)
  assert after["rounds"] - before["rounds"] < len(records)  # 4 slots: several per round


def test_a_slow_reply_is_a_scored_timeout(smollm2_server, counting_records):
  remote = http_executor.HttpExecutor(http_executor.EndpointConfig(
      smollm2_server, MODEL, timeout_s=0.05))
  (result,) = remote.solve(_tasks(counting_records[:1], max_tokens=8), [[]])
  assert result.error and result.score == 0.0 and not result.passed
  assert result.detail == f"{smollm2_server}/chat/completions: no reply within 0.05 s"


def test_an_unreachable_endpoint_names_its_url(free_port, counting_records):
  url = f"http://127.0.0.1:{free_port}/v1"
  remote = http_executor.HttpExecutor(http_executor.EndpointConfig(url, MODEL))
  with pytest.raises(http_executor.EndpointUnreachableError,
                     match=f"endpoint {url}/chat/completions is unreachable"):
    remote.solve(_tasks(counting_records[:2]), [[], []])


class _ScriptedEndpoint(http.server.ThreadingHTTPServer):
  """A loopback endpoint answering its scripted (status, headers, body) replies in turn."""

  def __init__(self, replies):
    self.replies, self.requests = list(replies), []

    class Handler(http.server.BaseHTTPRequestHandler):

      def do_POST(handler):  # pylint: disable=no-self-argument
        length = int(handler.headers["Content-Length"])
        self.requests.append((dict(handler.headers), json.loads(handler.rfile.read(length))))
        status, headers, body = self.replies.pop(0)
        handler.send_response(status)
        for key, value in headers.items():
          handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(body)

      def log_message(handler, *args):  # pylint: disable=no-self-argument
        del args  # quiet

    super().__init__(("127.0.0.1", 0), Handler)
    threading.Thread(target=self.serve_forever, daemon=True).start()

  @property
  def url(self):
    return f"http://127.0.0.1:{self.server_address[1]}/v1"


def _reply(text, prompt_tokens=7, completion_tokens=1):
  return 200, {}, json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}],
                              "usage": {"prompt_tokens": prompt_tokens,
                                        "completion_tokens": completion_tokens}}).encode()


def _error(status, message, headers=None):
  body = json.dumps({"error": {"message": message, "type": "server_error"}}).encode()
  return status, headers or {}, body


@pytest.fixture
def endpoint():
  servers = []

  def start(replies):
    servers.append(_ScriptedEndpoint(replies))
    return servers[-1]

  yield start
  for server in servers:
    server.shutdown()
    server.server_close()


def _client(url, **kw):
  return http_executor.HttpExecutor(http_executor.EndpointConfig(
      url, "frozen", backoff_s=0.01, max_concurrency=1, **kw))


def test_5xx_and_429_are_retried_with_backoff(endpoint, monkeypatch, counting_records):
  server = endpoint([_error(503, "overloaded"), _error(429, "slow down", {"Retry-After": "0"}),
                     _reply("8")])
  monkeypatch.setenv("EXECUTOR_TEST_KEY", "sk-test")
  client = _client(server.url, api_key_env="EXECUTOR_TEST_KEY")
  (result,) = client.solve(_tasks(counting_records[:1]), [[HINT]])
  assert (result.response, result.passed, result.prompt_tokens) == ("8", True, 7)
  assert client.retries == 2 and len(server.requests) == 3
  headers, body = server.requests[-1]
  assert headers["Authorization"] == "Bearer sk-test"
  assert body["model"] == "frozen" and body["max_tokens"] == 4 and body["temperature"] == 0.0
  assert HINT.text in body["messages"][1]["content"]


def test_exhausted_retries_and_client_errors_are_scored_failures(endpoint, counting_records):
  server = endpoint([_error(500, "boom")] * 3 + [_error(400, "prompt too long")] +
                    [(200, {}, b"not json")])
  client = _client(server.url, max_retries=2)
  results = client.solve(_tasks(counting_records), [[], [], []])
  url = f"{server.url}/chat/completions"
  assert [r.detail for r in results] == [
      f"{url}: HTTP 500 after 3 attempt(s): boom",
      f"{url}: HTTP 400 after 1 attempt(s): prompt too long",
      f"{url}: the reply is not a chat completion (JSONDecodeError: Expecting value: line 1 "
      "column 1 (char 0))"]
  assert all(r.error and r.score == 0.0 for r in results)
  assert len(server.requests) == 5 and "Authorization" not in server.requests[0][0]
