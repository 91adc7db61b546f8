"""Single-turn completions on the sampler's slots: many independent prompts, one turn each.

What a frozen executor and the chat-completions server need from the sampler: every prompt is a
fresh context (a reset), decoded as many at a time as there are free slots, and its slot is
released at once. A released slot keeps its cached ids, so a later prompt sharing their prefix
(the same system message) prefills only the rest.
"""

from __future__ import annotations

from typing import Sequence

from memex_jax.agent.policy import Turn, TurnRequest
from memex_jax.sampling.sampler import Sampler


def complete(sampler: Sampler, prompts: Sequence[Sequence[int]], max_tokens: Sequence[int],
             temperature: float | None = None, top_p: float | None = None) -> list[Turn]:
  """One sampled turn per prompt, in prompt order, in rounds of `num_slots` prompts.

  Args:
    sampler: owns the KV cache; it must hold no live episode (this borrows every slot).
    prompts: each prompt's whole context as token ids (non-empty).
    max_tokens: cap on each prompt's sampled ids (the sampler also caps at the cache's room).
    temperature, top_p: override the sampler's config for these prompts.

  Raises:
    ValueError: (one line) an empty prompt, a prompt that leaves no room in the cache, or
      lengths that disagree; RuntimeError if the sampler has live episodes.
  """
  if len(prompts) != len(max_tokens):
    raise ValueError(f"{len(prompts)} prompts but {len(max_tokens)} max_tokens")
  live = [s.episode for s in sampler.slots if s.episode is not None]
  if live:
    raise RuntimeError(f"the sampler has live episodes {live}; single-turn completions need "
                       "every slot")
  turns: list[Turn] = []
  width = sampler.config.num_slots
  for first in range(0, len(prompts), width):
    chunk = range(first, min(first + width, len(prompts)))
    requests = [TurnRequest(i, tuple(prompts[i]), True, int(max_tokens[i])) for i in chunk]
    try:
      turns += sampler.generate(requests, temperature=temperature, top_p=top_p)
    finally:
      for request in requests:
        sampler.release(request.episode_id)
  return turns
