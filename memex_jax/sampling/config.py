"""How the sampler decodes (`SamplerConfig`) and what it did (`SamplerStats`)."""

from __future__ import annotations

import dataclasses

DEFAULT_STOPS = ("</tool_call>", "<|im_end|>")


@dataclasses.dataclass(frozen=True)
class SamplerConfig:
  """How the sampler decodes.

  Attributes:
    num_slots: KV-cache rows, i.e. episodes decoded at once.
    cache_length: slots per row (the context window served).
    temperature: 0 for greedy; logprobs are log_softmax(logits / temperature).
    top_p: nucleus mass kept when sampling.
    stop_strings: a row stops on the token completing any of these.
    prompt_bucket: prefill lengths are padded up to a multiple of this (few compiles).
    new_tokens_bucket: output buffers are padded up to a multiple of this.
    seed: PRNG seed of the sampler's own stream.
    share_prefix: when the new contexts (resets) of one call share a head of at least
      `prompt_bucket` ids, prefill it once and copy its K/V into their rows; later resets that
      start with it copy it too. Exact: logprobs equal those without it to float rounding.
    chunk_tokens: `advance` decodes at most this many ids of each turn per call; a longer turn
      goes on in the next call, beside the turns started then, so one long turn (a
      CompressExperience) no longer holds every other episode's next step. 0: whole turns.
      Greedy turns are the same ids either way.
    prefill_chunk: a prefill call writes at most this many ids of each row; longer new contexts
      take several calls (0: one call). The prompt widths compiled are then at most
      `prefill_chunk / prompt_bucket`, and a call's short rows leave after its first piece.
  """

  num_slots: int = 8
  cache_length: int = 8192
  temperature: float = 1.0
  top_p: float = 1.0
  stop_strings: tuple[str, ...] = DEFAULT_STOPS
  prompt_bucket: int = 64
  new_tokens_bucket: int = 64
  seed: int = 0
  share_prefix: bool = True
  chunk_tokens: int = 32
  prefill_chunk: int = 256


@dataclasses.dataclass
class SamplerStats:
  """What the sampler did since it was built (assign a fresh one to restart the count).

  Attributes:
    calls: `generate` calls.
    prefill_tokens: ids prefilled into the slot rows (real ids, padding not counted).
    prefix_tokens: ids prefilled into the shared-prefix cache.
    reused_tokens: ids of new contexts whose K/V came from a cache (the slot's own, or the
      shared prefix) instead of a prefill.
    generated_tokens: ids sampled.
    prefill_s: seconds in prefills (the rows', the shared prefix's and its copies), waited on.
    decode_s: seconds in the decode loops, waited on, with the copy of their ids to the host.
  """

  calls: int = 0
  prefill_tokens: int = 0
  prefix_tokens: int = 0
  reused_tokens: int = 0
  generated_tokens: int = 0
  prefill_s: float = 0.0
  decode_s: float = 0.0
