"""A policy that plays scripted assistant turns (tests, demonstrations).

A turn is fixed text, a function of the decoded context the policy holds (so a script can only
use what its context shows, e.g. a code it must read back from memory), or raw token ids (what
a model may sample but no text encodes to, e.g. bytes that are not UTF-8). Text is tokenized
with the real tokenizer; the ids end with <|im_end|>; logprobs are 0.
"""

from __future__ import annotations

from typing import Callable, Sequence, Union

from memex_jax.agent.chat import ChatRenderer
from memex_jax.agent.policy import Turn, TurnRequest

ScriptedTurn = Union[str, Callable[[str], str], Sequence[int]]


class ScriptedPolicy:
  """Plays `scripts[episode_id]` turn by turn, tracking each episode's context ids."""

  def __init__(self, renderer: ChatRenderer, scripts: Sequence[Sequence[ScriptedTurn]]):
    self._renderer = renderer
    self._scripts = [list(script) for script in scripts]
    self._played = [0] * len(self._scripts)
    self._contexts: dict[int, list[int]] = {}

  def context_ids(self, episode_id: int) -> list[int]:
    """Everything the policy was given and produced for a live episode, in order."""
    return list(self._contexts[episode_id])

  def _next_ids(self, episode_id: int, context: list[int]) -> list[int]:
    if not 0 <= episode_id < len(self._scripts):
      raise KeyError(f"ScriptedPolicy has no script for episode {episode_id}")
    script, played = self._scripts[episode_id], self._played[episode_id]
    if played >= len(script):
      raise IndexError(f"ScriptedPolicy: episode {episode_id} asked for turn {played + 1} but "
                       f"its script has {len(script)}")
    self._played[episode_id] += 1
    turn = script[played]
    if callable(turn):
      turn = turn(self._renderer.tokenizer.decode(context))
    return self._renderer.tokenizer.encode(turn) if isinstance(turn, str) else list(turn)

  def generate(self, requests: Sequence[TurnRequest]) -> list[Turn]:
    turns = []
    for request in requests:
      if request.reset:
        self._contexts[request.episode_id] = list(request.new_ids)
      elif request.episode_id not in self._contexts:
        raise KeyError(f"episode {request.episode_id} continued without a reset")
      else:
        self._contexts[request.episode_id] += request.new_ids
      context = self._contexts[request.episode_id]
      ids = self._next_ids(request.episode_id, context) + [self._renderer.end_id]
      ids = ids[:request.max_new_tokens]
      context += ids
      turns.append(Turn(tuple(ids), (0.0,) * len(ids)))
    return turns

  def release(self, episode_id: int) -> None:
    self._contexts.pop(episode_id, None)
