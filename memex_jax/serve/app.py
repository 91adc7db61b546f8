"""The HTTP routes: `/v1/chat/completions`, `/v1/models`, `/health` (a Starlette app).

Every refusal is an OpenAI error object with its status (400 bad request, 404 unknown model or
route, 405 wrong method, 500 a failure of the server itself); none stops the server.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Sequence

from starlette import exceptions as starlette_exceptions
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from memex_jax.agent.chat import ChatRenderer
from memex_jax.serve import protocol
from memex_jax.serve.batching import SlotBatcher
from memex_jax.serve.model import ServedModel


def reply_text(renderer: ChatRenderer, ids: Sequence[int], stops: Sequence[str],
               max_tokens: int) -> tuple[str, int, str]:
  """(text, completion tokens, finish_reason) of a sampled turn under the request's stops.

  The text drops the closing <|im_end|>; a request's stop string and what follows it are cut,
  and the completion counts the tokens up to the one that completed the stop.
  """
  text = renderer.assistant_text(ids)
  text, stopped = protocol.cut_at_stops(text, stops)
  if stopped:
    used = next((k for k in range(1, len(ids) + 1)
                 if protocol.cut_at_stops(renderer.tokenizer.decode(list(ids[:k])), stops)[1]),
                len(ids))
    return text, used, "stop"
  ended = bool(ids) and ids[-1] in (renderer.end_id, renderer.tokenizer.eos_id)
  if len(ids) >= max_tokens and not ended and not text.endswith(protocol.CALL_CLOSE):
    return text, len(ids), "length"
  return text, len(ids), "stop"


def _error(error: protocol.ApiError) -> JSONResponse:
  return JSONResponse(error.body(), status_code=error.status)


def build_app(model: ServedModel, batcher: SlotBatcher, default_max_tokens: int = 512) -> Starlette:
  """The app serving `model` through `batcher`.

  Args:
    model: what `/v1/models` lists and requests must name.
    batcher: decodes the requests (its sampler's cache_length is the context window).
    default_max_tokens: the cap when a request gives none (bounded by the window's room).
  """
  renderer = ChatRenderer(model.tokenizer)
  window = batcher.sampler.config.cache_length

  def model_card() -> dict[str, Any]:
    return {"id": model.name, "object": "model", "created": int(time.time()),
            "owned_by": "memex_jax", "context_window": window}

  async def models(_: Request) -> JSONResponse:
    return JSONResponse({"object": "list", "data": [model_card()]})

  async def health(_: Request) -> JSONResponse:
    return JSONResponse({"status": "ok", "rounds": batcher.rounds, "batched": batcher.batched})

  def plan(body: Any) -> tuple[protocol.ChatRequest, list[int], int]:
    chat = protocol.parse_request(body)
    if chat.model != model.name:
      raise protocol.ApiError(404, f"The model '{chat.model}' does not exist; this server "
                              f"serves '{model.name}'.", param="model", code="model_not_found")
    prompt = renderer.prompt_ids(chat.messages)
    if len(prompt) >= window:
      raise protocol.ApiError(
          400, f"This model's maximum context length is {window} tokens, but the messages "
          f"take {len(prompt)}.", param="messages", code="context_length_exceeded")
    room = window - len(prompt)
    if chat.max_tokens is not None and chat.max_tokens > room:
      raise protocol.ApiError(
          400, f"max_tokens={chat.max_tokens} does not fit: the messages take {len(prompt)} of "
          f"the {window}-token context window, leaving {room}.", param="max_tokens",
          code="context_length_exceeded")
    return chat, prompt, chat.max_tokens or min(default_max_tokens, room)

  async def chat_completions(request: Request) -> JSONResponse:
    try:
      body = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
      return _error(protocol.ApiError(400, f"The request body is not valid JSON: {e}"))
    try:
      chat, prompt, max_tokens = plan(body)
    except protocol.ApiError as e:
      return _error(e)
    future = batcher.submit(prompt, max_tokens, chat.temperature, chat.top_p)
    try:
      turn = await asyncio.wrap_future(future)
    except Exception as e:  # pylint: disable=broad-except  # the request fails, not the server
      return _error(protocol.ApiError(500, f"decoding failed: {type(e).__name__}: {e}",
                                      kind="server_error"))
    text, used, finish = reply_text(renderer, turn.ids, chat.stop, max_tokens)
    return JSONResponse(protocol.completion_body(chat, text, finish, len(prompt), used))

  async def http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, starlette_exceptions.HTTPException)
    return _error(protocol.ApiError(exc.status_code, str(exc.detail),
                                    code="not_found" if exc.status_code == 404 else None))

  async def server_error(_: Request, exc: Exception) -> JSONResponse:
    return _error(protocol.ApiError(500, f"{type(exc).__name__}: {exc}", kind="server_error"))

  routes = [Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"])]
  return Starlette(routes=routes, exception_handlers={
      starlette_exceptions.HTTPException: http_error, Exception: server_error})
