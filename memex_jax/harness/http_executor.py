"""An OpenAI-compatible chat-completions endpoint as a frozen executor (stdlib HTTP client).

Requests run on a bounded thread pool. A 429 or 5xx reply is retried with exponential backoff
(a 429's Retry-After is honoured, up to the backoff cap); a per-request timeout, an exhausted
retry budget or another 4xx (e.g. a prompt over the endpoint's window) is that task's scored
failure. An endpoint that cannot be reached at all fails the whole batch with an error naming
its URL: no task could have been answered.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import socket
import time
import urllib.error
import urllib.request
from typing import Any, Sequence

from memex_jax.agent.chat import Message
from memex_jax.harness.executor import ChatExecutor, Completion


class EndpointUnreachableError(ConnectionError):
  """The endpoint refused or could not be resolved; the message names its URL."""


@dataclasses.dataclass(frozen=True)
class EndpointConfig:
  """Where and how to call an OpenAI-compatible endpoint.

  Attributes:
    base_url: up to and including `/v1`, e.g. http://127.0.0.1:8000/v1.
    model: the model id the endpoint serves.
    api_key_env: environment variable holding the API key; unset or empty sends none.
    max_concurrency: requests in flight at once.
    timeout_s: per-request timeout (connect and read).
    max_retries: retries of a 429/5xx reply before the task fails.
    backoff_s: first retry's delay; each further retry doubles it.
    max_backoff_s: cap on one delay (Retry-After included).
    temperature: sampling temperature (0: greedy, as frozen executors are evaluated).
  """

  base_url: str
  model: str
  api_key_env: str = "OPENAI_API_KEY"
  max_concurrency: int = 8
  timeout_s: float = 120.0
  max_retries: int = 4
  backoff_s: float = 0.5
  max_backoff_s: float = 30.0
  temperature: float = 0.0

  def __post_init__(self):
    if self.max_concurrency < 1 or self.timeout_s <= 0 or self.max_retries < 0:
      raise ValueError("EndpointConfig needs max_concurrency >= 1, timeout_s > 0 and "
                       f"max_retries >= 0; got {self}")

  @property
  def url(self) -> str:
    return self.base_url.rstrip("/") + "/chat/completions"


def _retryable(status: int) -> bool:
  return status == 429 or status >= 500


def _error_message(body: bytes) -> str:
  """The `error.message` of an OpenAI error body, else the body's start."""
  try:
    return str(json.loads(body)["error"]["message"])
  except (ValueError, KeyError, TypeError):
    return body[:200].decode("utf-8", "replace")


def _completion(body: bytes, url: str) -> Completion:
  """A 200 reply's text and usage; a body that is not a chat completion is a failure."""
  try:
    reply = json.loads(body)
    usage = reply.get("usage") or {}
    return Completion(reply["choices"][0]["message"].get("content") or "",
                      int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)))
  except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
    return Completion("", failure=f"{url}: the reply is not a chat completion "
                      f"({type(e).__name__}: {e})")


class HttpExecutor(ChatExecutor):
  """A frozen executor behind an OpenAI-compatible `/chat/completions` endpoint.

  Attributes:
    config: the endpoint and the client's limits.
    retries: retried replies so far (429/5xx), for the caller's logs.
  """

  def __init__(self, config: EndpointConfig):
    self.config = config
    self.retries = 0
    self._api_key = os.environ.get(config.api_key_env, "")

  def _post(self, payload: dict[str, Any]) -> tuple[int, bytes, float | None]:
    """(status, body, Retry-After seconds) of one POST; raises on connection failures."""
    headers = {"Content-Type": "application/json"}
    if self._api_key:
      headers["Authorization"] = f"Bearer {self._api_key}"
    request = urllib.request.Request(self.config.url, json.dumps(payload).encode(), headers)
    try:
      with urllib.request.urlopen(request, timeout=self.config.timeout_s) as response:
        return response.status, response.read(), None
    except urllib.error.HTTPError as e:
      retry_after = e.headers.get("Retry-After") if e.headers else None
      try:
        wait = float(retry_after) if retry_after is not None else None
      except ValueError:
        wait = None
      return e.code, e.read(), wait

  def _one(self, messages: Sequence[Message], max_tokens: int) -> Completion:
    cfg = self.config
    payload = {"model": cfg.model, "max_tokens": int(max_tokens), "temperature": cfg.temperature,
               "messages": [{"role": m.role, "content": m.content} for m in messages]}
    attempt = 0
    while True:
      try:
        status, body, retry_after = self._post(payload)
      except (TimeoutError, socket.timeout):
        return Completion("", failure=f"{cfg.url}: no reply within {cfg.timeout_s:g} s")
      except urllib.error.URLError as e:
        if isinstance(e.reason, (TimeoutError, socket.timeout)):
          return Completion("", failure=f"{cfg.url}: no reply within {cfg.timeout_s:g} s")
        raise EndpointUnreachableError(f"the executor endpoint {cfg.url} is unreachable: "
                                       f"{e.reason}") from None
      if status == 200:
        return _completion(body, cfg.url)
      if not _retryable(status) or attempt == cfg.max_retries:
        return Completion("", failure=f"{cfg.url}: HTTP {status} after {attempt + 1} attempt(s):"
                          f" {_error_message(body)}")
      self.retries += 1
      delay = cfg.backoff_s * 2 ** attempt if retry_after is None else retry_after
      time.sleep(min(delay, cfg.max_backoff_s))
      attempt += 1

  def complete(self, conversations: Sequence[Sequence[Message]],
               max_tokens: Sequence[int]) -> list[Completion]:
    with concurrent.futures.ThreadPoolExecutor(self.config.max_concurrency) as pool:
      return list(pool.map(self._one, conversations, max_tokens))
