"""The one place that imports jraph.

jraph 0.0.6.dev0 (its last release) still calls `jax.tree_map` and `jax.tree_leaves`, which jax
0.6 removed. Restoring the two aliases before the import makes jraph's utilities (padding masks,
`zero_out_padding`, batching) work on jax 0.10/0.11. Every harness module imports `jraph` from
here, never directly, so the aliases are set exactly once and before first use.
"""

import jax

if not hasattr(jax, "tree_map"):
  jax.tree_map = jax.tree.map
if not hasattr(jax, "tree_leaves"):
  jax.tree_leaves = jax.tree.leaves

import jraph  # pylint: disable=g-import-not-at-top,wrong-import-position

__all__ = ["jraph"]
