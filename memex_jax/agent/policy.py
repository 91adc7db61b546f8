"""The policy seam: what the agent loop asks of a model (JAX sampler, scripted policy, HTTP)."""

from __future__ import annotations

import dataclasses
from typing import Protocol, Sequence, runtime_checkable


@dataclasses.dataclass(frozen=True)
class TurnRequest:
  """One live episode's request for its next assistant turn.

  Attributes:
    episode_id: stable id of the episode (its KV slot in the sampler).
    new_ids: token ids to append to the episode's context since its last turn (the observation
      and the assistant header), or, when `reset`, the episode's whole new context.
    reset: the context restarts from `new_ids` (episode start, or after a compression).
    max_new_tokens: cap on this turn's sampled tokens.
  """

  episode_id: int
  new_ids: tuple[int, ...]
  reset: bool
  max_new_tokens: int


@dataclasses.dataclass(frozen=True)
class Turn:
  """A sampled assistant turn.

  Attributes:
    ids: sampled token ids, up to and including the token that completed a stop string.
    logprobs: log_softmax(logits / temperature) of each sampled id, same length as `ids`.
  """

  ids: tuple[int, ...]
  logprobs: tuple[float, ...]


class Policy(Protocol):
  """Produces the next turn of many episodes at once."""

  def generate(self, requests: Sequence[TurnRequest]) -> list[Turn]:
    """One turn per request, in request order."""

  def release(self, episode_id: int) -> None:
    """The episode ended: its slot and state may be reused."""


@runtime_checkable
class StreamingPolicy(Policy, Protocol):
  """A policy that can return the turns that ended while others are still being written."""

  def advance(self, requests: Sequence[TurnRequest]) -> dict[int, Turn]:
    """Starts a turn per request, works on every unfinished turn a while, and returns the turns
    that ended, by episode id (each started turn ends in this call or a later one)."""
