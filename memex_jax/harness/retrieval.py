"""Copilot-controlled retrieval from the experience graph (ExpHarness §3.3), pure and jitted.

`retrieve(state, queries, restart_control, weight_control, config)` is a pure function of the
graph arrays, the query embeddings and the copilot's two controls R and W, batched over tasks:

1. Semantic seeding: V0 = the top-m live nodes by cosine to the query (m = 10).
2. Diffusion: personalized PageRank from V0 with uniform seed weights q(v) = 1/|V0| and
   restart rho = clip(R / 100, 0.1, 0.9); walkers on dangling nodes restart at the seeds. It
   runs on the graph's link table and stops at a certified L1 error (`ppr_tolerance`).
3. Candidates: V0 plus the `num_ppr_candidates` (50) non-seed live nodes with the most PPR
   mass (a node the diffusion never reached, mass 0, is not a candidate).
4. UCB utility: b_v = u_v + c * sqrt(log(N_ret + 1) / max(n_v, 1)), c = 1.
5. score = (1 - lambda) * norm(sim) + lambda * norm(b), lambda = clip(W / 100, 0, 1), with
   norm the min-max over the task's candidates, (x - min) / (max - min + eps).
6. The top-K (10) candidates by score, best first.

The paper's text omits the equations of steps 2, 3 and 5; each choice above is a named
`RetrievalConfig` field. Its switches give the paper's ablations (see `ablation_configs`).
"""

from __future__ import annotations

import dataclasses
import functools

import flax.struct
import jax
import jax.numpy as jnp

from memex_jax.harness import diffusion
from memex_jax.harness import graph as graph_lib

ABLATIONS = ("full", "no_similarity_filter", "flat", "no_diffusion", "no_utility_ranking")


@dataclasses.dataclass(frozen=True)
class RetrievalConfig:
  """Retrieval hyperparameters (hashable: a static argument of the jitted `retrieve`).

  Attributes:
    num_seeds: m, semantic seeds per task (paper: 10).
    num_ppr_candidates: non-seed nodes with the most PPR mass added as candidates.
    top_k: K, experiences returned per task (paper: 10).
    ucb_c: c, the UCB exploration coefficient (paper: 1.0).
    num_iters: the most power-iteration steps of the PageRank.
    ppr_tolerance: the PageRank stops once its certified L1 error is at most this (0 runs all
      `num_iters`). At 1e-3 it takes 3 (R = 90) to ~17 (R = 10) steps on 2k-node graphs, and the
      retrieved sets equal those of a converged PageRank (tests/harness/test_retrieval.py); 1e-2
      already changes a few sets where candidates' masses nearly tie.
    control_scale: R and W are integers on [0, control_scale]: rho = R / scale, lambda = W / scale.
    restart_min: least restart probability rho (the clip's lower bound).
    restart_max: largest restart probability rho.
    norm_eps: epsilon of the min-max normalisation (all-equal candidates score 0).
    diffusion: False -> candidates are the seeds alone ("w/o graph diffusion").
    utility_ranking: False -> rank candidates by similarity alone ("w/o utility ranking").
    flat: True -> top-K live nodes by cosine, no graph at all ("flat experience").
  """

  num_seeds: int = 10
  num_ppr_candidates: int = 50
  top_k: int = 10
  ucb_c: float = 1.0
  num_iters: int = 50
  ppr_tolerance: float = 1e-3
  control_scale: float = 100.0
  restart_min: float = 0.1
  restart_max: float = 0.9
  norm_eps: float = 1e-6
  diffusion: bool = True
  utility_ranking: bool = True
  flat: bool = False

  def __post_init__(self):
    if (min(self.num_seeds, self.top_k, self.num_iters) < 1 or self.num_ppr_candidates < 0
        or self.ppr_tolerance < 0):
      raise ValueError(f"RetrievalConfig sizes must be positive (tolerance >= 0): {self}")
    if not 0.0 < self.restart_min <= self.restart_max <= 1.0:
      raise ValueError(f"RetrievalConfig needs 0 < restart_min <= restart_max <= 1: {self}")


@flax.struct.dataclass
class Retrieved:
  """The experiences chosen for a batch of B tasks, best first.

  Attributes:
    indices: [B, K] int32 graph slots; -1 where fewer than K candidates existed.
    valid: [B, K] bool, indices >= 0.
    scores: [B, K] float32 final scores (-inf where invalid).
    similarity: [B, K] float32 cosine of each chosen node to its task's query.
  """

  indices: jax.Array
  valid: jax.Array
  scores: jax.Array
  similarity: jax.Array


def ablation_configs(
    name: str, graph_config: graph_lib.GraphConfig = graph_lib.GraphConfig(),
    retrieval_config: RetrievalConfig = RetrievalConfig(),
) -> tuple[graph_lib.GraphConfig, RetrievalConfig]:
  """The (graph, retrieval) configs of one of the paper's ablations (Figure 3), or "full"."""
  replace = dataclasses.replace
  if name == "full":
    return graph_config, retrieval_config
  if name == "no_similarity_filter":
    return replace(graph_config, similarity_filter=False), retrieval_config
  if name == "flat":  # A flat pool: no edges stored, top-K by cosine.
    return replace(graph_config, k_nn=0), replace(retrieval_config, flat=True)
  if name == "no_diffusion":
    return graph_config, replace(retrieval_config, diffusion=False)
  if name == "no_utility_ranking":
    return graph_config, replace(retrieval_config, utility_ranking=False)
  raise ValueError(f"unknown ablation {name!r}; expected one of {ABLATIONS}")


def _min_max(values: jax.Array, valid: jax.Array, eps: float) -> jax.Array:
  """Min-max normalisation over the valid entries of the last axis."""
  low = jnp.min(jnp.where(valid, values, jnp.inf), axis=-1, keepdims=True)
  high = jnp.max(jnp.where(valid, values, -jnp.inf), axis=-1, keepdims=True)
  return jnp.where(valid, (values - low) / (high - low + eps), 0.0)


def _top(values: jax.Array, k: int) -> tuple[jax.Array, jax.Array, jax.Array]:
  """Top-k along the last axis of a -inf-masked array: (values, indices, valid)."""
  top_values, top_indices = jax.lax.top_k(values, k)
  return top_values, top_indices, jnp.isfinite(top_values)


@functools.partial(jax.jit, static_argnames=("config",))
def retrieve(state: graph_lib.GraphState, queries: jax.Array, restart_control: jax.Array,
             weight_control: jax.Array, config: RetrievalConfig = RetrievalConfig()) -> Retrieved:
  """Retrieves the top-K experiences for each of B tasks.

  Args:
    state: the graph (capacity N, so N + 1 rows with the padding node).
    queries: [B, E] task embeddings from the graph's embedding model (normalised here).
    restart_control: [B] R, the restart/locality control (rho = clip(R / 100, 0.1, 0.9)).
    weight_control: [B] W, the similarity-utility trade-off (lambda = W / 100).
    config: static hyperparameters and ablation switches.

  Returns:
    Retrieved with [B, K] slots, validity, scores and similarities.
  """
  nodes = state.graph.nodes
  num_rows = nodes.alive.shape[0]
  if max(config.num_seeds, config.top_k) > num_rows - 1:
    raise ValueError(f"graph capacity {num_rows - 1} is below num_seeds/top_k of {config}")
  # A zero query (no text) would give NaN similarities: it gets all-zero ones instead.
  queries = queries / jnp.maximum(jnp.linalg.norm(queries, axis=-1, keepdims=True), 1e-12)
  similarity = queries @ nodes.embedding.T  # B N+1
  similarity = jnp.where(nodes.alive, similarity, -jnp.inf)
  batch = jnp.arange(queries.shape[0])[:, None]

  if config.flat:
    top_sims, indices, valid = _top(similarity, config.top_k)
    return Retrieved(indices=jnp.where(valid, indices, -1).astype(jnp.int32), valid=valid,
                     scores=top_sims, similarity=top_sims)

  _, candidates, candidate_valid = _top(similarity, config.num_seeds)  # B m
  if config.diffusion and config.num_ppr_candidates:
    seed_weights = jnp.zeros_like(similarity).at[batch, candidates].set(
        candidate_valid.astype(jnp.float32))  # B N+1
    rho = jnp.clip(restart_control.astype(jnp.float32) / config.control_scale,
                   config.restart_min, config.restart_max)
    # The link table holds the GraphsTuple's edges in the layout that diffuses fastest.
    mass = diffusion.undirected_personalized_pagerank(
        state.links, seed_weights.T, rho, config.num_iters, config.ppr_tolerance).T  # B N+1
    mass = jnp.where(nodes.alive & (seed_weights == 0) & (mass > 0), mass, -jnp.inf)
    _, spread, spread_valid = _top(mass, min(config.num_ppr_candidates, num_rows))
    candidates = jnp.concatenate([candidates, spread], axis=-1)  # B C
    candidate_valid = jnp.concatenate([candidate_valid, spread_valid], axis=-1)

  candidate_sims = jnp.take_along_axis(similarity, candidates, axis=-1)  # B C
  score = _min_max(candidate_sims, candidate_valid, config.norm_eps)
  if config.utility_ranking:
    count = nodes.count[candidates].astype(jnp.float32)
    exploration = jnp.log(state.num_retrievals.astype(jnp.float32) + 1.0)
    ucb = nodes.utility[candidates] + config.ucb_c * jnp.sqrt(
        exploration / jnp.maximum(count, 1.0))
    lam = jnp.clip(weight_control.astype(jnp.float32) / config.control_scale, 0.0, 1.0)[:, None]
    score = (1.0 - lam) * score + lam * _min_max(ucb, candidate_valid, config.norm_eps)
  score = jnp.where(candidate_valid, score, -jnp.inf)
  # With fewer candidates than K (seeds only, m < K) pad the choice to K invalid entries.
  shortfall = max(config.top_k - candidates.shape[-1], 0)

  def pad(x, fill):
    return jnp.pad(x, ((0, 0), (0, shortfall)), constant_values=fill)

  score, candidates = pad(score, -jnp.inf), pad(candidates, 0)
  candidate_sims = pad(candidate_sims, -jnp.inf)
  top_scores, picked, valid = _top(score, config.top_k)
  indices = jnp.take_along_axis(candidates, picked, axis=-1)
  return Retrieved(indices=jnp.where(valid, indices, -1).astype(jnp.int32), valid=valid,
                   scores=top_scores,
                   similarity=jnp.take_along_axis(candidate_sims, picked, axis=-1))
