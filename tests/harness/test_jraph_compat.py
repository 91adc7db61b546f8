"""jraph imports and its tree-map-based utilities run on this jax."""

import jax
import numpy as np

from memex_jax.harness import graph as graph_lib
from memex_jax.harness.jraph_compat import jraph


def test_jraph_padding_utilities_work_on_the_experience_graph():
  config = graph_lib.GraphConfig(capacity=6, embed_dim=3, k_nn=2, grace_insertions=0,
                                 edge_threshold=-1.0, similarity_filter=False)
  state = graph_lib.init_state(config)
  rng = np.random.default_rng(0)
  for _ in range(3):
    state, _ = graph_lib.insert(state, rng.normal(size=3), 0, config)
  graph = jax.device_put(state.graph)
  edge_mask = np.asarray(jraph.get_edge_padding_mask(graph))
  assert edge_mask.sum() == state.num_edges == 6  # 1<->0, 2<->0, 2<->1.
  assert not edge_mask[state.num_edges:].any()
  node_mask = np.asarray(jraph.get_node_padding_mask(graph))
  np.testing.assert_array_equal(node_mask, [True] * 6 + [False])
  # zero_out_padding calls jax.tree_map, removed from jax but restored by jraph_compat.
  zeroed = jraph.zero_out_padding(graph)
  assert not np.asarray(zeroed.nodes.embedding[-1]).any()
  np.testing.assert_array_equal(zeroed.nodes.embedding[:3], graph.nodes.embedding[:3])
