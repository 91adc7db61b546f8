"""Graph feedback after each batch of tasks: the reward, utility updates and new experiences.

ExpHarness Eqs. 14-17: a task solved with retrieved experiences earns
r = (s_with - s_without) + eta * s_with; every node it retrieved moves its utility toward r
(EMA beta) and counts one more retrieval; its finished trajectory is summarised into a unit that
is inserted (near-duplicates filtered, capacity and eviction as the graph does).

Multi-host: every host holds the same graph and solves its own share of the tasks. Each host's
feedback is serialised, all-gathered, and every host applies the whole list in the same order
(process 0's first, each host's in its own order), so the graphs stay identical without a
graph server. Within one list, all utility updates come before any insertion: the retrieved
slots are those of the graph the tasks retrieved from, which an insertion's eviction could
otherwise have emptied or refilled.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable, Sequence

import jax
import numpy as np

from memex_jax.harness.experience import ExperienceGraph, ExperienceUnit


def copilot_reward(s_with: float, s_without: float, eta: float = 1.0) -> float:
  """Eq. 14: the gain over No-Memory plus eta times the absolute score."""
  return (s_with - s_without) + eta * s_with


@dataclasses.dataclass(frozen=True)
class TaskFeedback:
  """What one finished task gives back to the graph.

  Attributes:
    task_id: the task.
    slots: graph slots it retrieved (utility/count updates); empty when nothing was retrieved.
    reward: its Eq. 14 reward.
    units: experience units summarised from its trajectory (none if the summary was dropped).
    embeddings: [len(units)] lists of E floats, each unit's embedding.
  """

  task_id: str
  slots: tuple[int, ...]
  reward: float
  units: tuple[ExperienceUnit, ...] = ()
  embeddings: tuple[tuple[float, ...], ...] = ()

  def __post_init__(self):
    if len(self.units) != len(self.embeddings):
      raise ValueError(f"task {self.task_id}: {len(self.units)} units but "
                       f"{len(self.embeddings)} embeddings")

  def to_json(self) -> dict:
    return {"task_id": self.task_id, "slots": list(self.slots), "reward": self.reward,
            "units": [dataclasses.asdict(u) for u in self.units],
            "embeddings": [list(e) for e in self.embeddings]}

  @classmethod
  def from_json(cls, data: dict) -> "TaskFeedback":
    return cls(task_id=data["task_id"], slots=tuple(int(s) for s in data["slots"]),
               reward=float(data["reward"]),
               units=tuple(ExperienceUnit(**u) for u in data["units"]),
               embeddings=tuple(tuple(float(x) for x in e) for e in data["embeddings"]))


def task_feedback(task_id: str, slots: Sequence[int], reward: float,
                  unit: ExperienceUnit | None, embedding: np.ndarray | None) -> TaskFeedback:
  """Feedback of one task; `unit` None (its summary was dropped) inserts nothing.

  The embedding goes through float32 -> Python float, which is exact, so a unit's embedding is
  bit-identical on every host that applies it.
  """
  valid = tuple(int(s) for s in slots if int(s) >= 0)
  if unit is None:
    return TaskFeedback(task_id, valid, float(reward))
  vector = tuple(float(x) for x in np.asarray(embedding, np.float32))
  return TaskFeedback(task_id, valid, float(reward), (unit,), (vector,))


@dataclasses.dataclass(frozen=True)
class FeedbackStats:
  """What applying one list of feedback did.

  Attributes:
    tasks: feedback entries applied.
    nodes_updated: node utility updates (a node retrieved by two tasks counts twice).
    insertions: units inserted as new nodes.
    duplicates: units dropped as near-duplicates.
    evictions: nodes evicted to make room.
  """

  tasks: int = 0
  nodes_updated: int = 0
  insertions: int = 0
  duplicates: int = 0
  evictions: int = 0

  def as_dict(self) -> dict[str, int]:
    return dataclasses.asdict(self)


def apply_feedback(graph: ExperienceGraph, feedback: Sequence[TaskFeedback]) -> FeedbackStats:
  """Applies every entry in order: first all utility updates, then all insertions."""
  updated = insertions = duplicates = evictions = 0
  for entry in feedback:
    if entry.slots:
      graph.record_feedback(entry.slots, entry.reward)
      updated += len(set(entry.slots))
  for entry in feedback:
    for unit, embedding in zip(entry.units, entry.embeddings):
      outcome = graph.insert(unit, np.asarray(embedding, np.float32))
      insertions += outcome.slot >= 0
      duplicates += outcome.duplicate_of >= 0
      evictions += outcome.evicted >= 0
  return FeedbackStats(len(feedback), updated, insertions, duplicates, evictions)


def _allgather_bytes(payload: bytes) -> list[bytes]:
  """Every process's payload, in process order (identity on one process)."""
  if jax.process_count() == 1:
    return [payload]
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
  length = np.asarray([len(payload)], np.int64)
  lengths = np.asarray(multihost_utils.process_allgather(length)).reshape(-1)
  padded = np.zeros(int(lengths.max()), np.uint8)
  padded[:len(payload)] = np.frombuffer(payload, np.uint8)
  gathered = np.asarray(multihost_utils.process_allgather(padded)).reshape(len(lengths), -1)
  return [gathered[i, :n].tobytes() for i, n in enumerate(lengths)]


def allgather_json(value: Any,
                   allgather: Callable[[bytes], list[bytes]] = _allgather_bytes) -> list[Any]:
  """Every process's JSON-serialisable `value`, in process order, on every process."""
  return [json.loads(part.decode("utf-8"))
          for part in allgather(json.dumps(value).encode("utf-8"))]


def gather_feedback(local: Sequence[TaskFeedback],
                    allgather: Callable[[bytes], list[bytes]] = _allgather_bytes
                    ) -> list[TaskFeedback]:
  """Every host's feedback as one list in the same order on all hosts (process 0's first)."""
  parts = allgather_json([f.to_json() for f in local], allgather)
  return [TaskFeedback.from_json(entry) for part in parts for entry in part]
