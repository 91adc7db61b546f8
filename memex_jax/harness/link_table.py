"""The experience graph's fixed-width link table: each node's own K_nn links (host-side numpy).

Every edge of the experience graph was made by one insertion: the new node linked to at most
K_nn earlier nodes, in both directions. So each undirected edge has an owner, its later-inserted
end, and each node owns at most K_nn edges. The table lists them:

  links[v, j] = the j-th node (in slot order) v linked to when it was inserted; the padding
  node where unused.

It holds the same edges as the GraphsTuple's senders/receivers (both directions of every row's
links), in a shape that lets diffusion gather from the K columns instead of scattering over all
2 * K_nn * N directed edges (`diffusion.undirected_personalized_pagerank`, which says what that
saves).
"""

from __future__ import annotations

import numpy as np


def link_table(senders: np.ndarray, receivers: np.ndarray, inserted_at: np.ndarray,
               k_nn: int) -> np.ndarray:
  """Returns the [N, k_nn] int32 link table of an undirected edge list.

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
  table = np.full((num_rows, k_nn), num_rows - 1, np.int32)
  table[owners, column] = targets
  return table
