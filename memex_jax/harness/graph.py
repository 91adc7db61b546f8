"""The experience graph: a padded jraph GraphsTuple of static capacity plus its host-side updates.

Each node is an experience unit v = (text e, embedding h, utility u, retrieval count n) plus its
kind (skill / lesson), source task and insertion step (ExpHarness §3.2, appendix "Experience
graph"). The arrays live in one pytree, `GraphState`, whose shapes never change as the graph
grows, so the jitted retrieval compiles once. Texts and other metadata live host-side in
`ExperienceGraph`, indexed by the same slots.

Layout of `GraphState.graph` (jraph's padding convention):
- nodes: `NodeArrays` with capacity + 1 rows; the last row is the padding node (never alive).
- senders / receivers: [max_edges] int32. The live edges come first, sorted by receiver (a
  canonical order: equal graphs have equal arrays); the rest are padding edges on the padding
  node. n_node = [capacity, 1],
  n_edge = [num_edges, max_edges - num_edges].
Slots of evicted nodes are dead rows (alive False, zeros) with no edges. `GraphState.links`
holds the same edges as a table of each node's own K_nn links with the nodes' inverse degrees,
which diffusion reads (see link_table.py); every update rebuilds both from one edge list.

Updates are host-side numpy functions that return a new state (the old one is never mutated);
call `jax.device_put(state)` once after updating, before retrieving many times.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import flax.struct
import jax
import numpy as np

from memex_jax.harness.jraph_compat import jraph
from memex_jax.harness.link_table import LinkTable, link_table

KINDS = ("skill", "lesson")  # kind code = index: 0 skill (from success), 1 lesson (failure).


@dataclasses.dataclass(frozen=True)
class GraphConfig:
  """Static shape and maintenance rules of the experience graph.

  Attributes:
    capacity: |V|_max, the most live nodes (paper: 2,000).
    embed_dim: E, the embedding width (384 for all-MiniLM-L6-v2).
    k_nn: K_nn, out-links of a new node to its nearest neighbours (paper: 5). 0 stores no edges
      (the flat-store ablation).
    edge_threshold: theta, the least cosine for an edge (paper: 0.3).
    similarity_filter: drop a new unit whose cosine to a live node reaches
      `duplicate_threshold` (the paper's insertion-time similarity filter; False is its
      "w/o similarity filtering" ablation).
    duplicate_threshold: cosine at which a new unit counts as a near-duplicate. The paper gives
      no number; 0.95 keeps paraphrases of one lesson out while distinct lessons on one task
      type (cosine ~0.6-0.9 under MiniLM) stay.
    grace_insertions: a node cannot be evicted until this many later insertions happened, so it
      gets a chance to be retrieved before its utility is judged. Must be < capacity, so an
      evictable node always exists.
    utility_ema: beta of the utility EMA u <- (1 - beta) u + beta r (paper: 0.1).
    initial_utility: u of a new node; rewards r = (s_with - s_without) + eta s_with lie in
      [-1, 2], so 0 is "no evidence either way".
    eviction_count_weight: when full, evict the node (out of grace) with the lowest
      u + eviction_count_weight * log(1 + n): low utility and rarely retrieved go first. Ties
      go to the oldest.
  """

  capacity: int = 2000
  embed_dim: int = 384
  k_nn: int = 5
  edge_threshold: float = 0.3
  similarity_filter: bool = True
  duplicate_threshold: float = 0.95
  grace_insertions: int = 50
  utility_ema: float = 0.1
  initial_utility: float = 0.0
  eviction_count_weight: float = 0.1

  def __post_init__(self):
    if self.capacity < 1 or self.embed_dim < 1 or self.k_nn < 0:
      raise ValueError(f"GraphConfig needs capacity, embed_dim >= 1 and k_nn >= 0: {self}")
    if not 0 <= self.grace_insertions < self.capacity:
      raise ValueError(f"GraphConfig.grace_insertions must be in [0, capacity): {self}")
    if not 0.0 < self.utility_ema <= 1.0:
      raise ValueError(f"GraphConfig.utility_ema must be in (0, 1]: {self}")

  @property
  def max_edges(self) -> int:
    """Edge capacity: every live node owns at most 2 * k_nn directed edges (its insertion's)."""
    return max(2 * self.k_nn * self.capacity, 1)


@flax.struct.dataclass
class NodeArrays:
  """Per-node arrays, capacity + 1 rows (the last is jraph's padding node).

  Attributes:
    embedding: [N+1, E] float32 unit-norm embeddings (zeros on dead slots).
    utility: [N+1] float32 shared-reward estimate u_v.
    count: [N+1] int32 retrieval count n_v.
    alive: [N+1] bool, whether the slot holds a node.
    kind: [N+1] int8 index into KINDS.
    inserted_at: [N+1] int32 value of `GraphState.num_insertions` when the node was inserted.
  """

  embedding: np.ndarray
  utility: np.ndarray
  count: np.ndarray
  alive: np.ndarray
  kind: np.ndarray
  inserted_at: np.ndarray


@flax.struct.dataclass
class GraphState:
  """The whole experience graph as one pytree.

  Attributes:
    graph: padded GraphsTuple; `graph.nodes` is a NodeArrays.
    num_retrievals: [] int32 N_ret, retrievals whose feedback reached the graph.
    num_insertions: [] int32 insertions so far (the clock of the grace period).
    num_duplicates: [] int32 units dropped as near-duplicates.
    links: the same edges as `graph` by owner: `links.targets[:, v]` lists the nodes v linked
      to when inserted (the padding node where unused), with each node's inverse degree; see
      `link_table`.
  """

  graph: jraph.GraphsTuple
  links: LinkTable
  num_retrievals: np.ndarray
  num_insertions: np.ndarray
  num_duplicates: np.ndarray

  @property
  def nodes(self) -> NodeArrays:
    return self.graph.nodes

  @property
  def capacity(self) -> int:
    return self.graph.nodes.alive.shape[0] - 1

  @property
  def num_edges(self) -> int:
    return int(self.graph.n_edge[0])

  @property
  def num_nodes(self) -> int:
    return int(np.asarray(self.graph.nodes.alive).sum())


@dataclasses.dataclass(frozen=True)
class InsertOutcome:
  """What one insertion did.

  Attributes:
    slot: the new node's slot, or -1 when the unit was dropped as a near-duplicate.
    evicted: the slot evicted to make room, or -1.
    duplicate_of: the live node the unit duplicated, or -1.
    neighbours: slots the new node was linked to (both directions).
  """

  slot: int
  evicted: int = -1
  duplicate_of: int = -1
  neighbours: tuple[int, ...] = ()


def _with_edges(graph: jraph.GraphsTuple, senders: np.ndarray, receivers: np.ndarray,
                config: GraphConfig) -> tuple[jraph.GraphsTuple, LinkTable]:
  """`graph` holding exactly these live edges (sorted by receiver, padded), and their links."""
  num_edges, max_edges = senders.shape[0], config.max_edges
  if num_edges > max_edges:
    raise ValueError(f"{num_edges} edges exceed the edge capacity {max_edges}")
  links = link_table(senders, receivers, graph.nodes.inserted_at, config.k_nn)
  padding_node = graph.nodes.alive.shape[0] - 1
  order = np.lexsort((senders, receivers))
  padded_senders = np.full(max_edges, padding_node, np.int32)
  padded_receivers = np.full(max_edges, padding_node, np.int32)
  padded_senders[:num_edges] = senders[order]
  padded_receivers[:num_edges] = receivers[order]
  return graph._replace(
      senders=padded_senders, receivers=padded_receivers,
      n_edge=np.array([num_edges, max_edges - num_edges], np.int32)), links


def state_from_arrays(config: GraphConfig, embedding: np.ndarray, senders: np.ndarray,
                      receivers: np.ndarray, *, utility: np.ndarray | None = None,
                      count: np.ndarray | None = None, alive: np.ndarray | None = None,
                      kind: np.ndarray | None = None, inserted_at: np.ndarray | None = None,
                      num_retrievals: int = 0, num_insertions: int | None = None,
                      num_duplicates: int = 0, normalize: bool = True) -> GraphState:
  """Builds a state from whole arrays at once (loading, synthetic benchmark graphs).

  Args:
    config: shapes; `embedding` must have at most `config.capacity` rows.
    embedding: [n, E] node embeddings, normalised here; rows n..capacity stay dead.
    senders: [num_edges] int edge sources in [0, n).
    receivers: [num_edges] int edge targets in [0, n).
    utility, count, alive, kind, inserted_at: [n] per-node values (defaults: initial utility,
      0, all alive, skill, row order as if inserted one by one).
    num_retrievals, num_insertions, num_duplicates: the counters (insertions default to n).
    normalize: L2-normalise the live rows; False keeps them bit for bit (loading a saved
      graph) after checking they are unit norm.
  """
  embedding = np.asarray(embedding, np.float32)
  n = embedding.shape[0]
  if embedding.ndim != 2 or embedding.shape[1] != config.embed_dim or n > config.capacity:
    raise ValueError(f"embedding has shape {embedding.shape}; expected [<= {config.capacity}, "
                     f"{config.embed_dim}]")
  senders, receivers = np.asarray(senders, np.int32), np.asarray(receivers, np.int32)
  if senders.shape != receivers.shape or senders.ndim != 1:
    raise ValueError(f"senders {senders.shape} and receivers {receivers.shape} must be equal [E]")
  if senders.size and (min(senders.min(), receivers.min()) < 0
                       or max(senders.max(), receivers.max()) >= n):
    raise ValueError(f"edge endpoints must lie in [0, {n})")
  state = init_state(config)
  nodes = state.nodes

  def filled(values, default, dtype):
    out = np.zeros(config.capacity + 1, dtype)
    out[:n] = default if values is None else np.asarray(values, dtype)
    return out

  alive = filled(alive, True, bool)
  if senders.size and not (alive[senders].all() and alive[receivers].all()):
    raise ValueError("an edge touches a node that is not alive")
  all_alive = bool(alive[:n].all())
  live_rows = embedding if all_alive else embedding[alive[:n]]  # no copy of a full graph
  if not normalize and not np.allclose(np.linalg.norm(live_rows, axis=-1), 1.0, atol=1e-4):
    raise ValueError("embeddings of live nodes must have unit norm")
  live_rows = _normalized(live_rows) if normalize else live_rows
  if all_alive:
    nodes.embedding[:n] = live_rows
  else:
    nodes.embedding[:n][alive[:n]] = live_rows
  nodes = nodes.replace(
      utility=filled(utility, config.initial_utility, np.float32),
      count=filled(count, 0, np.int32), alive=alive, kind=filled(kind, 0, np.int8),
      inserted_at=filled(inserted_at, np.arange(n), np.int32))
  graph, links = _with_edges(state.graph._replace(nodes=nodes), senders, receivers, config)
  return GraphState(graph=graph, links=links, num_retrievals=np.int32(num_retrievals),
                    num_insertions=np.int32(n if num_insertions is None else num_insertions),
                    num_duplicates=np.int32(num_duplicates))


def init_state(config: GraphConfig) -> GraphState:
  """An empty graph of `config`'s capacity."""
  rows = config.capacity + 1
  nodes = NodeArrays(
      embedding=np.zeros((rows, config.embed_dim), np.float32),
      utility=np.zeros(rows, np.float32), count=np.zeros(rows, np.int32),
      alive=np.zeros(rows, bool), kind=np.zeros(rows, np.int8),
      inserted_at=np.zeros(rows, np.int32))
  graph = jraph.GraphsTuple(
      nodes=nodes, edges=None, globals=None,
      senders=np.empty(0, np.int32), receivers=np.empty(0, np.int32),
      n_node=np.array([config.capacity, 1], np.int32), n_edge=np.zeros(2, np.int32))
  graph, links = _with_edges(graph, np.empty(0, np.int32), np.empty(0, np.int32), config)
  return GraphState(graph=graph, links=links, num_retrievals=np.int32(0),
                    num_insertions=np.int32(0),
                    num_duplicates=np.int32(0))


def _normalized(embedding: np.ndarray) -> np.ndarray:
  norms = np.linalg.norm(embedding, axis=-1, keepdims=True)
  if not np.all(np.isfinite(embedding)) or np.any(norms == 0):
    raise ValueError("embeddings must be finite and non-zero")
  return (embedding / norms).astype(np.float32)


def to_host(state: GraphState) -> GraphState:
  """A numpy copy of `state` (it may hold device arrays)."""
  return jax.tree.map(np.array, state)


def live_edges(state: GraphState) -> tuple[np.ndarray, np.ndarray]:
  """The live (senders, receivers), [num_edges] each, without the padding edges."""
  num_edges = state.num_edges
  return (np.asarray(state.graph.senders)[:num_edges],
          np.asarray(state.graph.receivers)[:num_edges])


def evict(state: GraphState, slot: int, config: GraphConfig) -> GraphState:
  """Removes the node in `slot` and every edge that touches it."""
  state = to_host(state)
  if not 0 <= slot < state.capacity or not state.nodes.alive[slot]:
    raise ValueError(f"cannot evict slot {slot}: no live node there")
  senders, receivers = live_edges(state)
  keep = (senders != slot) & (receivers != slot)
  nodes = state.nodes
  for array in (nodes.embedding, nodes.utility, nodes.count, nodes.alive, nodes.kind,
                nodes.inserted_at):
    array[slot] = 0
  graph, links = _with_edges(state.graph._replace(nodes=nodes), senders[keep], receivers[keep],
                             config)
  return state.replace(graph=graph, links=links)


def eviction_candidate(state: GraphState, config: GraphConfig) -> int:
  """The live node out of its grace period to evict first, or -1 if none."""
  nodes = state.nodes
  alive = np.asarray(nodes.alive)[:-1]
  inserted_at = np.asarray(nodes.inserted_at)[:-1]
  later_insertions = int(state.num_insertions) - 1 - inserted_at
  evictable = alive & (later_insertions >= config.grace_insertions)
  if not evictable.any():
    return -1
  keep_score = (np.asarray(nodes.utility)[:-1]
                + config.eviction_count_weight * np.log1p(np.asarray(nodes.count)[:-1]))
  keep_score = np.where(evictable, keep_score, np.inf)
  # lexsort: last key is primary -> lowest keep score, then oldest.
  return int(np.lexsort((inserted_at, keep_score))[0])


def insert(state: GraphState, embedding: np.ndarray, kind: int,
           config: GraphConfig) -> tuple[GraphState, InsertOutcome]:
  """Inserts one experience unit's node (host-side).

  Args:
    state: the current graph.
    embedding: [E] the unit's embedding (normalised here).
    kind: index into KINDS.
    config: the rules (capacity, K_nn, theta, duplicate filter, grace, eviction).

  Returns:
    The new state and what happened: a near-duplicate is dropped and counted; a full graph
    first evicts its eviction candidate (deleting its edges); the new node links both ways to
    its K_nn most similar live nodes with cosine >= theta.
  """
  if kind not in range(len(KINDS)):
    raise ValueError(f"kind must index {KINDS}, got {kind}")
  embedding = np.asarray(embedding, np.float32)
  if embedding.shape != (config.embed_dim,):
    raise ValueError(f"embedding has shape {embedding.shape}, expected ({config.embed_dim},)")
  unit = _normalized(embedding[None])[0]
  state = to_host(state)
  alive = state.nodes.alive[:-1]
  similarity = np.where(alive, state.nodes.embedding[:-1] @ unit, -np.inf)  # N
  if config.similarity_filter and alive.any():
    nearest = int(np.argmax(similarity))
    if similarity[nearest] >= config.duplicate_threshold:
      return (state.replace(num_duplicates=state.num_duplicates + 1),
              InsertOutcome(slot=-1, duplicate_of=nearest))
  evicted = -1
  if alive.all():
    evicted = eviction_candidate(state, config)
    state = evict(state, evicted, config)
    similarity[evicted] = -np.inf
  nodes = state.nodes
  slot = int(np.argmin(nodes.alive[:-1]))  # the lowest free slot
  nearest = np.argsort(-similarity, kind="stable")[:config.k_nn]
  neighbours = nearest[similarity[nearest] >= config.edge_threshold].astype(np.int32)
  nodes.embedding[slot] = unit
  nodes.utility[slot] = config.initial_utility
  nodes.count[slot] = 0
  nodes.alive[slot] = True
  nodes.kind[slot] = kind
  nodes.inserted_at[slot] = state.num_insertions
  senders, receivers = live_edges(state)
  new_ends = np.full(neighbours.shape, slot, np.int32)
  graph, links = _with_edges(state.graph._replace(nodes=nodes),
                             np.concatenate([senders, new_ends, neighbours]),
                             np.concatenate([receivers, neighbours, new_ends]), config)
  state = state.replace(graph=graph, links=links, num_insertions=state.num_insertions + 1)
  return state, InsertOutcome(slot=slot, evicted=evicted, neighbours=tuple(neighbours.tolist()))


def record_feedback(state: GraphState, slots: Sequence[int], reward: float,
                    config: GraphConfig) -> GraphState:
  """Moves the utility of the nodes one task used toward its reward, and counts the retrieval.

  u_v <- (1 - beta) u_v + beta r and n_v <- n_v + 1 for each distinct v in `slots`
  (paper Eqs. 16-17); N_ret <- N_ret + 1.
  """
  state = to_host(state)
  slots = np.unique(np.asarray(slots, np.int64))
  if slots.size and (slots.min() < 0 or slots.max() >= state.capacity
                     or not state.nodes.alive[slots].all()):
    raise ValueError(f"feedback names slots without a live node: {slots.tolist()}")
  if not np.isfinite(reward):
    raise ValueError(f"reward must be finite, got {reward}")
  nodes = state.nodes
  beta = config.utility_ema
  nodes.utility[slots] = (1.0 - beta) * nodes.utility[slots] + beta * reward
  nodes.count[slots] += 1
  return state.replace(graph=state.graph._replace(nodes=nodes),
                       num_retrievals=state.num_retrievals + 1)
