r"""Experience-graph retrieval latency: JAX retrieval and PPR vs a scipy sparse reference.

  python -m bench.retrieval [--sizes 2000,100000,1000000] [--batch 64] [--out PATH]

For each graph size N it times, on the default JAX backend (CPU, or the GPU when one is there),
the whole jitted retrieval (seeding, PPR, candidates, UCB blend, top-K) for one task and for a
batch of B tasks; and, in the same run on the CPU, the reference: the same power iteration
(same iterations, restarts and seeds) with a scipy CSR matrix times the [N, B] seed matrix, and
times one column. The JAX PPR of the first columns is compared to the reference (max abs
difference). The batched reference runs once (at 10^6 nodes it takes minutes on 2 cores).

Graphs: node embeddings are random unit vectors (E = 384, the MiniLM width). Edges follow the
degree the insertion rule gives a full graph: every node links to K_nn = 5 other nodes, each
link stored in both directions (2 * K_nn * N directed edges, in-degree 10 on average). The
targets are uniform random, not true nearest neighbours: an exact K_nn graph of 10^6 points in
384 dimensions would take hours to build, and for latency only the degree and memory-access
pattern matter (random targets are the cache-unfriendly worst case). Everything is built with
vectorised numpy, never by per-node inserts.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import statistics
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse

from memex_jax.harness import diffusion
from memex_jax.harness import graph as graph_lib
from memex_jax.harness import retrieval

EMBED_DIM = 384
K_NN = 5


def synthetic_graph(num_nodes: int, seed: int) -> graph_lib.GraphState:
  """A full graph of N nodes with random unit embeddings and K_nn-degree random links."""
  rng = np.random.default_rng(seed)
  embedding = np.empty((num_nodes, EMBED_DIM), np.float32)
  for start in range(0, num_nodes, 65536):  # chunks keep the float64 temporaries small
    chunk = rng.standard_normal((min(65536, num_nodes - start), EMBED_DIM), np.float32)
    embedding[start:start + len(chunk)] = chunk / np.linalg.norm(chunk, axis=1, keepdims=True)
  owners = np.repeat(np.arange(num_nodes, dtype=np.int32), K_NN)
  targets = ((owners + rng.integers(1, num_nodes, owners.size)) % num_nodes).astype(np.int32)
  config = graph_lib.GraphConfig(capacity=num_nodes, embed_dim=EMBED_DIM, k_nn=K_NN,
                                 grace_insertions=0)
  return graph_lib.state_from_arrays(
      config, embedding, np.concatenate([owners, targets]), np.concatenate([targets, owners]),
      utility=rng.uniform(-1, 2, num_nodes).astype(np.float32),
      count=rng.integers(0, 20, num_nodes).astype(np.int32), num_retrievals=1000,
      normalize=False)


def time_call(fn: Callable[[], Any], reps: int) -> tuple[dict[str, float], Any]:
  """Milliseconds per call over `reps` calls, and the last call's output."""
  times = []
  for _ in range(reps):
    start = time.perf_counter()
    output = jax.block_until_ready(fn())
    times.append((time.perf_counter() - start) * 1e3)
  return {"median_ms": statistics.median(times), "min_ms": min(times), "reps": reps}, output


def compiled(fn: Callable[..., Any], *args: Any) -> tuple[Callable[[], Any], float]:
  """Ahead-of-time compiles fn(*args) (no warm-up run needed); returns it and compile ms."""
  start = time.perf_counter()
  executable = jax.jit(fn).lower(*args).compile()
  return (lambda: executable(*args)), (time.perf_counter() - start) * 1e3


def scipy_ppr(transposed: scipy.sparse.csr_matrix, dangling: np.ndarray, seeds: np.ndarray,
              rho: np.ndarray, num_iters: int) -> np.ndarray:
  """Reference power iteration: X <- rho Q + (1 - rho)(P^T X + Q (d . X)), Q [N, B].

  Written in place (one new [N, B] array per step, the product) so the reference is not slowed
  by temporaries; the dangling term is skipped when no node is dangling.
  """
  restart_mass = rho * seeds
  x = seeds
  for _ in range(num_iters):
    spread = transposed @ x
    if dangling.any():
      spread += seeds * x[dangling].sum(axis=0)
    spread *= 1.0 - rho
    spread += restart_mass
    x = spread
  return x


def bench_size(num_nodes: int, batch: int, config: retrieval.RetrievalConfig, reps: int,
               seed: int) -> dict[str, Any]:
  start = time.perf_counter()
  host_state = synthetic_graph(num_nodes, seed)
  build_s = time.perf_counter() - start
  rng = np.random.default_rng(seed + 1)
  queries = rng.standard_normal((batch, EMBED_DIM), np.float32)
  restart_control = rng.integers(10, 91, batch).astype(np.int32)
  weight_control = rng.integers(0, 101, batch).astype(np.int32)
  state = jax.device_put(host_state)
  num_rows = num_nodes + 1
  row = {"num_nodes": num_nodes, "num_edges": host_state.num_edges, "batch": batch,
         "build_graph_s": round(build_s, 2)}

  def retrieve_fn(state, queries, restart_control, weight_control):
    return retrieval.retrieve(state, queries, restart_control, weight_control, config)

  args_single = (state, queries[:1], restart_control[:1], weight_control[:1])
  args_batch = (state, queries, restart_control, weight_control)
  single, row["compile_single_ms"] = compiled(retrieve_fn, *args_single)
  row["jax_retrieve_single"], _ = time_call(single, reps)
  batched, row["compile_batch_ms"] = compiled(retrieve_fn, *args_batch)
  row["jax_retrieve_batch"], _ = time_call(batched, max(1, reps // 4))

  # The seeds of the batch (top-m by cosine), shared by the JAX PPR and the scipy reference.
  sims = np.asarray(jax.jit(lambda q, e: q @ e.T)(
      queries / np.linalg.norm(queries, axis=1, keepdims=True), state.nodes.embedding))
  seed_idx = np.argpartition(-sims[:, :num_nodes], config.num_seeds, axis=1)[:, :config.num_seeds]
  seeds = np.zeros((num_rows, batch), np.float32)
  seeds[seed_idx, np.arange(batch)[:, None]] = 1.0 / config.num_seeds
  rho = np.clip(restart_control / config.control_scale, config.restart_min,
                config.restart_max).astype(np.float32)
  del sims

  # JAX PPR of a few of the same columns, to check it computes what the reference does.
  check = min(batch, 8)
  jax_mass = np.asarray(jax.jit(diffusion.personalized_pagerank, static_argnums=(2, 5))(
      state.graph.senders, state.graph.receivers, num_rows, seeds[:, :check], rho[:check],
      config.num_iters))
  del state, batched, single

  senders, receivers = graph_lib.live_edges(host_state)
  out_degree = np.bincount(senders, minlength=num_rows).astype(np.float32)
  transposed = scipy.sparse.csr_matrix(
      (1.0 / out_degree[senders], (receivers, senders)), shape=(num_rows, num_rows))
  dangling = out_degree == 0
  start = time.perf_counter()
  reference = scipy_ppr(transposed, dangling, seeds, rho, config.num_iters)
  row["scipy_ppr_batch"] = {"median_ms": (time.perf_counter() - start) * 1e3, "reps": 1}
  row["scipy_ppr_single"], _ = time_call(
      lambda: scipy_ppr(transposed, dangling, seeds[:, :1], rho[:1], config.num_iters),
      max(1, reps // 4))
  row["max_abs_diff_jax_vs_scipy"] = float(np.abs(jax_mass - reference[:, :check]).max())
  row["per_task_ms"] = {key: row[key]["median_ms"] / batch
                        for key in ("jax_retrieve_batch", "scipy_ppr_batch")}
  row["speedup_batch_retrieve_vs_scipy_ppr"] = (row["scipy_ppr_batch"]["median_ms"]
                                                / row["jax_retrieve_batch"]["median_ms"])
  return row


def print_table(rows: list[dict[str, Any]], backend: str) -> None:
  header = (f"{'N':>9} {'edges':>9} | {backend} retrieve 1 task | retrieve B (per task) | "
            f"scipy PPR 1 | scipy PPR B (per task) | speedup B | max|diff|")
  print(header)
  print("-" * len(header))
  for row in rows:

    def fmt(key, row=row):
      return f"{row[key]['median_ms']:9.3f} ms"

    def pair(key, row=row):
      return f"{row[key]['median_ms']:9.2f} ({row[key]['median_ms'] / row['batch']:7.3f}) ms"

    print(f"{row['num_nodes']:>9} {row['num_edges']:>9} | {fmt('jax_retrieve_single'):>20} | "
          f"{pair('jax_retrieve_batch'):>21} | {fmt('scipy_ppr_single'):>11} | "
          f"{pair('scipy_ppr_batch'):>22} | "
          f"{row['speedup_batch_retrieve_vs_scipy_ppr']:8.2f}x | "
          f"{row['max_abs_diff_jax_vs_scipy']:.1e}")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--sizes", default="2000,100000,1000000",
                      help="comma-separated node counts")
  parser.add_argument("--batch", type=int, default=64, help="tasks per batched retrieval")
  parser.add_argument("--iters", type=int, default=retrieval.RetrievalConfig.num_iters,
                      help="PPR power iterations")
  parser.add_argument("--reps", default="200,8,2",
                      help="timed calls per size for single-task runs (batched: a quarter)")
  parser.add_argument("--out", default=None,
                      help="JSON path (default bench/results/retrieval_<backend>.json)")
  args = parser.parse_args()
  sizes = [int(size) for size in args.sizes.split(",")]
  reps = [int(rep) for rep in args.reps.split(",")]
  reps += [reps[-1]] * (len(sizes) - len(reps))
  backend = jax.default_backend()
  config = retrieval.RetrievalConfig(num_iters=args.iters)
  rows = []
  for size, rep in zip(sizes, reps):
    rows.append(bench_size(size, args.batch, config, rep, seed=0))
    print(f"done N={size} ({rows[-1]['build_graph_s']} s to build)", flush=True)
  print_table(rows, backend)
  out = args.out or os.path.join(os.path.dirname(__file__), "results",
                                 f"retrieval_{backend}.json")
  os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
  with open(out, "w") as f:
    json.dump({
        "command": "python -m bench.retrieval " + " ".join(
            f"--{k} {v}" for k, v in vars(args).items() if v is not None),
        "backend": backend, "device": str(jax.devices()[0].device_kind),
        "jax": jax.__version__, "cpu_count": os.cpu_count(), "machine": platform.machine(),
        "load_average": os.getloadavg(), "date": datetime.datetime.now().isoformat(),
        "retrieval_config": dataclasses.asdict(config),
        "graph": f"random unit embeddings E={EMBED_DIM}, K_nn={K_NN} random links both ways",
        "rows": rows}, f, indent=1, default=str)
  print(f"wrote {out}")


if __name__ == "__main__":
  main()
