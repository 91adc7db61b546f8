"""Concurrent requests batched onto the sampler's slots by one decoding thread.

HTTP handlers submit prompts and wait on futures; the thread owns the sampler and, each round,
takes up to `num_slots` waiting prompts that share sampling settings (the decode loop takes one
temperature and top-p per call) and decodes them together. Prompts arriving during a round wait
for the next one, so under load every round fills the slots. A round starts `gather_s` after
its oldest prompt arrived, or as soon as the slots fill: clients answered by one round send their
next requests a few milliseconds apart, and without the wait the first of them would run alone.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import threading
import time

from memex_jax.agent.policy import Turn
from memex_jax.sampling import completions
from memex_jax.sampling.sampler import Sampler


@dataclasses.dataclass
class _Job:
  prompt: list[int]
  max_tokens: int
  settings: tuple[float, float]  # (temperature, top_p)
  future: concurrent.futures.Future
  arrived: float = dataclasses.field(default_factory=time.monotonic)


class SlotBatcher:
  """Owns a sampler; `submit` is thread-safe, decoding happens on the batcher's thread.

  Attributes:
    sampler: the sampler (no one else may use it while the batcher runs).
    gather_s: how long a round waits for more prompts to fill its slots.
    rounds: decode calls made so far.
    batched: prompts decoded so far (batched / rounds is the mean fill of the slots).
  """

  def __init__(self, sampler: Sampler, gather_s: float = 0.02):
    self.sampler = sampler
    self.gather_s = gather_s
    self.rounds = 0
    self.batched = 0
    self._queue: collections.deque[_Job] = collections.deque()
    self._wake = threading.Condition()
    self._closed = False
    self._thread = threading.Thread(target=self._run, name="slot-batcher", daemon=True)
    self._thread.start()

  def submit(self, prompt: list[int], max_tokens: int, temperature: float,
             top_p: float) -> concurrent.futures.Future:
    """Queues one prompt; the future gets its Turn, or the exception its round raised.

    A prompt that cannot fit the cache fails on its own here, never in a round it would sink.
    """
    job = _Job(list(prompt), max_tokens, (temperature, top_p), concurrent.futures.Future())
    window = self.sampler.config.cache_length
    if not job.prompt or len(job.prompt) >= window:
      job.future.set_exception(ValueError(f"a prompt of {len(job.prompt)} ids does not fit the "
                                          f"{window}-slot cache with room to sample"))
      return job.future
    with self._wake:
      if self._closed:
        raise RuntimeError("the batcher is closed")
      self._queue.append(job)
      self._wake.notify()
    return job.future

  def close(self) -> None:
    """Stops the thread after the current round; queued prompts fail."""
    with self._wake:
      self._closed = True
      self._wake.notify()
    self._thread.join()
    for job in self._queue:
      job.future.set_exception(RuntimeError("the server is shutting down"))
    self._queue.clear()

  def _next_round(self) -> list[_Job] | None:
    """The oldest waiting job and up to num_slots - 1 more with the same settings."""
    slots = self.sampler.config.num_slots
    with self._wake:
      while not self._queue and not self._closed:
        self._wake.wait()
      first = None if self._closed else self._queue[0]
      settings = first and first.settings
      deadline = first.arrived + self.gather_s if first else 0.0
      while (not self._closed and
             sum(j.settings == settings for j in self._queue) < slots and
             (left := deadline - time.monotonic()) > 0):
        self._wake.wait(left)
      if self._closed:
        return None
      chosen = [j for j in self._queue if j.settings == settings][:slots]
      for job in chosen:
        self._queue.remove(job)
      return chosen

  def _run(self) -> None:
    while (jobs := self._next_round()) is not None:
      jobs = [j for j in jobs if j.future.set_running_or_notify_cancel()]
      if not jobs:
        continue
      temperature, top_p = jobs[0].settings
      try:
        turns: list[Turn] = completions.complete(
            self.sampler, [j.prompt for j in jobs], [j.max_tokens for j in jobs],
            temperature=temperature, top_p=top_p)
      except Exception as e:  # pylint: disable=broad-except  # reported to each request
        for job in jobs:
          job.future.set_exception(e)
        continue
      self.rounds += 1
      self.batched += len(jobs)
      for job, turn in zip(jobs, turns):
        job.future.set_result(turn)
