"""The experience graph's fixed-width link table: each node's own K_nn links (host-side numpy).

Every edge of the experience graph was made by one insertion: the new node linked to at most
K_nn earlier nodes, in both directions. So each undirected edge has an owner, its later-inserted
end, and each node owns at most K_nn edges. The table lists them:

  targets[j, v] = the j-th node (in slot order) v linked to when it was inserted; the padding
  node where unused.

It holds the same edges as the GraphsTuple's senders/receivers (both directions of every row's
links), in the layout diffusion reads: one contiguous row of N per link column, so diffusion
gathers from K rows instead of scattering over all 2 * K_nn * N directed edges, plus each node's
inverse degree (`diffusion.undirected_personalized_pagerank` says what each saves). Both change
only when the edges do, so they are built here, once per update, not in every retrieval.
"""

from __future__ import annotations

import flax.struct
import numpy as np


@flax.struct.dataclass
class LinkTable:
  """An undirected graph of N rows (the last is the padding node) by each node's own links.

  Attributes:
    targets: [K, N] int32; targets[j, v] = u is the undirected edge {v, u}, walkable both ways.
      Entries equal to N - 1 (the padding node, which has no edges) are empty.
    inverse_degree: [N] float32, 1 / (number of edges at v); 0 where v has none (isolated,
      dead or padding rows).
  """

  targets: np.ndarray
  inverse_degree: np.ndarray

  @property
  def rows(self) -> np.ndarray:
    """[N, K] the table by node: rows[v] lists the nodes v linked to (host-side numpy)."""
    return np.asarray(self.targets).T


def link_table(senders: np.ndarray, receivers: np.ndarray, inserted_at: np.ndarray,
               k_nn: int) -> LinkTable:
  """Returns the link table (K = k_nn) of an undirected edge list.

  Args:
    senders: [E] int, the live directed edges; every edge must come with its reverse.
    receivers: [E] int.
    inserted_at: [N] int insertion step of each row (the last row is the padding node); ties
      are broken by slot, later slot = later insertion.
    k_nn: the most links a node may own.

  Raises:
    ValueError: an edge without its reverse, a self-loop, or a node owning more than k_nn
      links (edges that no sequence of K_nn insertions makes).
  """
  num_rows = inserted_at.shape[0]
  senders = np.asarray(senders, np.int64)
  receivers = np.asarray(receivers, np.int64)
  if np.any(senders == receivers):
    raise ValueError("the experience graph has no self-loops")
  order_key = np.asarray(inserted_at, np.int64) * num_rows + np.arange(num_rows)
  owned = order_key[senders] > order_key[receivers]
  owners, targets = senders[owned], receivers[owned]
  # Undirected: the reversed owned edges must be exactly the other half, as a multiset.
  forward = np.sort(owners * num_rows + targets)
  backward = np.sort(receivers[~owned] * num_rows + senders[~owned])
  if forward.shape != backward.shape or np.any(forward != backward):
    raise ValueError("every edge of the experience graph must come with its reverse")
  counts = np.bincount(owners, minlength=num_rows)
  if counts.max(initial=0) > k_nn:
    node = int(np.argmax(counts))
    raise ValueError(f"node {node} owns {counts[node]} links to earlier-inserted nodes; an "
                     f"insertion makes at most k_nn={k_nn}")
  by_owner = np.lexsort((targets, owners))  # canonical: equal graphs give equal tables
  owners, targets = owners[by_owner], targets[by_owner]
  column = np.arange(owners.size) - np.repeat(np.cumsum(counts) - counts, counts)
  table = np.full((k_nn, num_rows), num_rows - 1, np.int32)
  table[column, owners] = targets
  # Every edge comes with its reverse, so a node's out-edges count its edges.
  degree = np.bincount(senders, minlength=num_rows)
  inverse_degree = np.where(degree > 0, 1.0 / np.maximum(degree, 1), 0.0).astype(np.float32)
  return LinkTable(targets=table, inverse_degree=inverse_degree)
