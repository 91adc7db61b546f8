"""Host-side holder of the experience graph: its state pytree plus each node's text and origin.

`ExperienceGraph` keeps `GraphState` (arrays, see graph.py) and, for every slot, the
`ExperienceUnit` it holds, so evictions and insertions keep both in step. Retrieval takes only
`ExperienceGraph.state` (a pure function of arrays); its slot indices map back to texts here.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import jax
import numpy as np

from memex_jax.harness import graph as graph_lib


@dataclasses.dataclass(frozen=True)
class ExperienceUnit:
  """One summarised experience (paper Tables 34-38).

  Attributes:
    text: the natural-language skill or lesson e_v.
    kind: "skill" (distilled from a high-scoring trajectory) or "lesson" (from a failure).
    source_task: identifier of the task whose trajectory it was summarised from.
  """

  text: str
  kind: str
  source_task: str

  def __post_init__(self):
    if self.kind not in graph_lib.KINDS:
      raise ValueError(f"ExperienceUnit.kind must be one of {graph_lib.KINDS}, got {self.kind!r}")
    if not self.text.strip():
      raise ValueError("ExperienceUnit.text is empty")


class ExperienceGraph:
  """The graph's state, its per-slot units and the embedding model that made its embeddings.

  Attributes:
    config: the graph's GraphConfig.
    embedding_model: name of the encoder of every embedding in the graph (and of the queries).
    state: the current GraphState (numpy arrays).
    units: [capacity] the unit in each slot, None for free slots.
  """

  def __init__(self, config: graph_lib.GraphConfig, embedding_model: str,
               state: graph_lib.GraphState | None = None,
               units: Sequence[ExperienceUnit | None] | None = None):
    self.config = config
    self.embedding_model = embedding_model
    self.state = graph_lib.init_state(config) if state is None else state
    self.units = [None] * config.capacity if units is None else list(units)
    alive = np.asarray(self.state.nodes.alive)[:-1]
    if len(self.units) != config.capacity or alive.shape != (config.capacity,):
      raise ValueError(f"state and units must both have capacity {config.capacity}")
    if any((unit is not None) != bool(live) for unit, live in zip(self.units, alive)):
      raise ValueError("units and state.alive disagree about which slots hold a node")

  def __len__(self) -> int:
    return self.state.num_nodes

  def insert(self, unit: ExperienceUnit, embedding: np.ndarray) -> graph_lib.InsertOutcome:
    """Inserts `unit` with its [E] embedding; see graph.insert for the rules."""
    kind = graph_lib.KINDS.index(unit.kind)
    self.state, outcome = graph_lib.insert(self.state, embedding, kind, self.config)
    if outcome.evicted >= 0:
      self.units[outcome.evicted] = None
    if outcome.slot >= 0:
      self.units[outcome.slot] = unit
    return outcome

  def record_feedback(self, slots: Sequence[int], reward: float) -> None:
    """Utility EMA toward `reward` and count increments for the nodes a task used."""
    self.state = graph_lib.record_feedback(self.state, slots, reward, self.config)

  def units_at(self, slots: Sequence[int]) -> list[ExperienceUnit]:
    """The units in `slots`, skipping -1 (retrieval's "nothing here")."""
    out = []
    for slot in slots:
      slot = int(slot)
      if slot < 0:
        continue
      unit = self.units[slot] if slot < len(self.units) else None
      if unit is None:
        raise ValueError(f"slot {slot} holds no experience unit")
      out.append(unit)
    return out

  def device_state(self) -> graph_lib.GraphState:
    """The state on the default device, for many retrievals between updates."""
    return jax.device_put(self.state)
