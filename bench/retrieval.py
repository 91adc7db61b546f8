r"""Experience-graph retrieval latency: JAX retrieval and PPR vs a scipy sparse reference.

  python -m bench.retrieval [--sizes 2000,100000,1000000] [--clustered 2000] [--batch 64]
                            [--rounds 5] [--out PATH]

For each graph size N, on the default JAX backend (CPU, or the GPU when one is there), it times
the whole jitted retrieval (seeding, PPR, candidates, UCB blend, top-K):
- for one task at the restart controls R = 10, 50 and 90 (rho = R / 100 sets how many steps
  the PageRank needs to certify its error: few at R = 90, most at R = 10);
- for a batch of B tasks with R drawn from [10, 90], reported per task;
both in `--rounds` rounds on fresh buffers (the median of the round medians; the table shows
the spread of R = 10's). Beside them, "back-to-back": one-task retrievals at R = 10 of the first
32 of those tasks, run in turn inside one compiled call, per retrieval. That is the retrieval's
work without the per-call costs (dispatch, waking the runtime's threads), which on a small
shared CPU vary from process to process; the gap to the one-task row is that overhead.
In the same run, on the CPU, the reference: the same power iteration with a scipy CSR matrix
times the [N, B] seed matrix, run for as many steps as the JAX PageRank took (one task: R = 50).
Accuracy: the JAX PageRank of the first columns against a float64 scipy iteration run to a
certified L1 error of 1e-9: the L1 error (the config's `ppr_tolerance` bounds it) and the share
of the top-50 PageRank candidates both agree on.
The table is printed; the JSON (`--out`) and a log-log plot of per-task latency against N beside
it (same name, .png) are written.

Small graphs on a small CPU: run pinned to one core (`taskset -c 0 python -m bench.retrieval
...`; the JSON records the CPUs). XLA then splits no kernel over threads and keeps one worker
thread, so a one-task call makes no hand-offs between cores. On the 2-vCPU development VM, in
three alternating pairs of 2k-node runs, that cut the one-task R = 10 median from 1.05-1.47 ms
to 0.72-0.93 ms; at 100k nodes the second core is worth more than the hand-offs cost (one task,
R = 10: 53 ms unpinned, 61 ms pinned).

Graphs: node embeddings are random unit vectors (E = 384, the MiniLM width). Edges follow the
insertion rule's shape: node i, in insertion order, links to K_nn = 5 distinct earlier nodes,
each link stored in both directions (~2 * K_nn * N directed edges, degree 10 on average; old
nodes collect more links, as in a growing graph). The targets are uniform random, not true
nearest neighbours: an exact K_nn graph of 10^6 points in 384
dimensions would take hours to build, and for latency only the degree and memory-access pattern
matter (random targets are the cache-unfriendly worst case). Everything is built with vectorised
numpy, never by per-node inserts. Queries are random unit vectors.

The random graph is also the PageRank's worst case: it mixes fast, so mass spreads over the whole
graph and certifying the error takes the most steps. `--clustered` sizes add a row on a graph
built the way the harness builds one, by `graph.insert` of clustered units (task families:
CLUSTERS unit centres plus noise, so members have cosine ~0.5 and strangers ~0), with queries
drawn the same way; there mass stays within a few families (13 instead of 17 steps at R = 10 on
2k nodes). Inserting costs O(N) per node, so this row is for small N (2k took 6.5-7.6 s here).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import pathlib
import time
from typing import Any

import jax
import matplotlib
import numpy as np
import scipy.sparse

from bench import report
from memex_jax.harness import diffusion
from memex_jax.harness import graph as graph_lib
from memex_jax.harness import retrieval

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position

EMBED_DIM = 384
CLUSTERS = 40
K_NN = 5
SINGLE_CONTROLS = (10, 50, 90)
BACK_TO_BACK = f"R={SINGLE_CONTROLS[0]} back-to-back ms"
# Retrievals per back-to-back call: 16, 32 and 64 gave the same per-retrieval time within noise
# at 2k nodes (64 at 10^6 nodes cost ~3.5 minutes of the default run, at ~1 s a retrieval).
BACK_TO_BACK_TASKS = 32
REFERENCE_TOLERANCE = 1e-9


def synthetic_graph(num_nodes: int, seed: int) -> graph_lib.GraphState:
  """A full graph of N nodes with random unit embeddings and K_nn-degree random links."""
  rng = np.random.default_rng(seed)
  embedding = np.empty((num_nodes, EMBED_DIM), np.float32)
  for start in range(0, num_nodes, 65536):  # chunks keep the float64 temporaries small
    chunk = rng.standard_normal((min(65536, num_nodes - start), EMBED_DIM), np.float32)
    embedding[start:start + len(chunk)] = chunk / np.linalg.norm(chunk, axis=1, keepdims=True)
  owners, targets = _earlier_links(num_nodes, rng)
  config = graph_lib.GraphConfig(capacity=num_nodes, embed_dim=EMBED_DIM, k_nn=K_NN,
                                 grace_insertions=0)
  return graph_lib.state_from_arrays(
      config, embedding, np.concatenate([owners, targets]), np.concatenate([targets, owners]),
      utility=rng.uniform(-1, 2, num_nodes).astype(np.float32),
      count=rng.integers(0, 20, num_nodes).astype(np.int32), num_retrievals=1000,
      normalize=False)


def clustered_graph(num_nodes: int, batch: int,
                    seed: int) -> tuple[graph_lib.GraphState, np.ndarray]:
  """(a graph of N clustered units built by real insertions, B queries from the same families)."""
  rng = np.random.default_rng(seed)
  centres = rng.standard_normal((CLUSTERS, EMBED_DIM))
  centres /= np.linalg.norm(centres, axis=1, keepdims=True)

  def members(count: int, noise: float) -> np.ndarray:  # noise norm ~ `noise`
    return (centres[rng.integers(0, CLUSTERS, count)] + noise * rng.standard_normal(
        (count, EMBED_DIM)) / np.sqrt(EMBED_DIM)).astype(np.float32)

  config = graph_lib.GraphConfig(capacity=num_nodes, embed_dim=EMBED_DIM, k_nn=K_NN,
                                 grace_insertions=0)
  state = graph_lib.init_state(config)
  for unit in members(num_nodes, noise=1.0):
    state, _ = graph_lib.insert(state, unit, 0, config)
  state = state.replace(graph=state.graph._replace(nodes=state.nodes.replace(
      utility=rng.uniform(-1, 2, num_nodes + 1).astype(np.float32),
      count=rng.integers(0, 20, num_nodes + 1).astype(np.int32))), num_retrievals=np.int32(1000))
  return state, members(batch, noise=1.2)


def _earlier_links(num_nodes: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
  """Each node i links to min(i, K_nn) distinct uniformly random earlier nodes (insertion order)."""
  owners = np.repeat(np.arange(num_nodes, dtype=np.int64), K_NN)
  targets = np.floor(rng.random(owners.size) * owners).astype(np.int64)
  keep = np.tile(np.arange(K_NN), num_nodes) < owners  # node i has only i earlier nodes
  table = np.where(keep, targets, -1).reshape(num_nodes, K_NN)
  for _ in range(100):  # redraw repeats within a row until the K_nn targets are distinct
    ordered = np.sort(table, axis=1)
    repeated = np.zeros_like(table, bool)
    repeated[:, 1:] = (ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)
    if not repeated.any():
      break
    rows = np.nonzero(repeated.any(axis=1))[0]
    table[rows] = np.sort(table[rows], axis=1)
    redraw = repeated[rows]
    table[rows] = np.where(redraw, np.floor(rng.random(redraw.shape) * rows[:, None]), table[rows])
  owners, targets = owners[table.reshape(-1) >= 0], table.reshape(-1)[table.reshape(-1) >= 0]
  return owners.astype(np.int32), targets.astype(np.int32)


def scipy_ppr(transposed: scipy.sparse.csr_matrix, dangling: np.ndarray, seeds: np.ndarray,
              rho: np.ndarray, num_iters: int, tolerance: float = 0.0) -> np.ndarray:
  """Reference power iteration X <- rho Q + (1 - rho)(P^T X + Q (d . X)), Q [N, B].

  Runs `num_iters` steps, or fewer once the certified L1 error (1 - rho) / rho * change of
  every column is at most `tolerance` (> 0). In place (one new [N, B] array per step, the
  product) so the reference is not slowed by temporaries; the dangling term is skipped when no
  node is dangling.
  """
  restart_mass = rho * seeds
  x = seeds
  for _ in range(num_iters):
    spread = transposed @ x
    if dangling.any():
      spread += seeds * x[dangling].sum(axis=0)
    spread *= 1.0 - rho
    spread += restart_mass
    if tolerance and np.all((1 - rho) / rho * np.abs(spread - x).sum(axis=0) <= tolerance):
      return spread
    x = spread
  return x


def _seed_matrix(state: graph_lib.GraphState, queries: np.ndarray, num_seeds: int) -> np.ndarray:
  """[N+1, B] uniform weights on each query's top-m nodes by cosine (the retrieval's seeds)."""
  unit = queries / np.linalg.norm(queries, axis=1, keepdims=True)
  sims = np.asarray(jax.jit(lambda q, e: q @ e.T)(unit, state.nodes.embedding))[:, :-1]
  top = np.argpartition(-sims, num_seeds, axis=1)[:, :num_seeds]
  seeds = np.zeros((sims.shape[1] + 1, len(queries)), np.float32)
  seeds[top, np.arange(len(queries))[:, None]] = 1.0 / num_seeds
  return seeds


def _top50_agreement(got: np.ndarray, want: np.ndarray, seeds: np.ndarray) -> float:
  """Mean share of the top-50 non-seed nodes by PageRank mass that `got` and `want` share."""
  shares = []
  for column in range(got.shape[1]):
    others = seeds[:, column] == 0
    top = [set(np.flatnonzero(others)[np.argsort(-mass[others, column])[:50]])
           for mass in (got, want)]
    shares.append(len(top[0] & top[1]) / 50)
  return float(np.mean(shares))


def bench_size(num_nodes: int, batch: int, config: retrieval.RetrievalConfig, reps: int,
               seed: int, clustered: bool = False, rounds: int = 1) -> dict[str, Any]:
  start = time.perf_counter()
  rng = np.random.default_rng(seed + 1)
  if clustered:
    host_state, queries = clustered_graph(num_nodes, batch, seed)
    host_state = graph_lib.to_host(host_state)
  else:
    host_state = graph_lib.to_host(synthetic_graph(num_nodes, seed))
    queries = rng.standard_normal((batch, EMBED_DIM)).astype(np.float32)
  row: dict[str, Any] = {"N": num_nodes, "graph": "clustered" if clustered else "random",
                         "edges": host_state.num_edges,
                         "build_s": round(time.perf_counter() - start, 2)}
  batch_controls = rng.integers(10, 91, batch).astype(np.int32)
  weight_control = rng.integers(0, 101, batch).astype(np.int32)
  num_rows = num_nodes + 1

  compiled = jax.jit(functools.partial(retrieval.retrieve, config=config))
  calls = {f"1 task R={r} ms": (compiled, (queries[:1], np.array([r], np.int32),
                                           weight_control[:1]), reps)
           for r in SINGLE_CONTROLS}
  calls["batch ms/task"] = (compiled, (queries, batch_controls, weight_control),
                            max(1, reps // 4))
  chained = queries[:BACK_TO_BACK_TASKS, None]
  calls[BACK_TO_BACK] = (back_to_back_retrievals(config), (chained, np.array(
      [SINGLE_CONTROLS[0]], np.int32), weight_control[:1]), max(1, reps // 4))
  timed = _timings_in_rounds(host_state, calls, rounds)
  slowest = timed[f"1 task R={SINGLE_CONTROLS[0]} ms"]["round_medians_ms"]
  row.update((name, timed[name]) for name in calls if name.startswith("1 task"))
  row[f"R={SINGLE_CONTROLS[0]} rounds ms"] = f"{min(slowest):.3g}-{max(slowest):.3g}"
  row.update((name, timed[name]) for name in (BACK_TO_BACK, "batch ms/task"))
  state = jax.device_put(host_state)

  # The PageRank alone on the retrieval's seeds: its steps, and the columns checked for accuracy.
  seeds = _seed_matrix(host_state, queries, config.num_seeds)
  rho = np.clip(batch_controls / config.control_scale, config.restart_min,
                config.restart_max).astype(np.float32)
  ppr = jax.jit(functools.partial(diffusion.undirected_personalized_pagerank,
                                  num_iters=config.num_iters, tolerance=config.ppr_tolerance,
                                  return_steps=True))  # the form the retrieval runs
  steps = {}
  for r_control in SINGLE_CONTROLS:
    _, taken = ppr(state.links, seeds[:, :1], np.float32([r_control / config.control_scale]))
    steps[r_control] = int(taken)
  check = min(batch, 8)
  jax_mass, taken = ppr(state.links, seeds, rho)
  jax_mass = np.asarray(jax_mass[:, :check], np.float64)
  steps["batch"] = int(taken)
  row["steps R=10/50/90/batch"] = "/".join(str(s) for s in steps.values())
  del state, compiled

  senders, receivers = graph_lib.live_edges(host_state)
  out_degree = np.bincount(senders, minlength=num_rows).astype(np.float32)
  transposed = scipy.sparse.csr_matrix(
      (1.0 / out_degree[senders], (receivers, senders)), shape=(num_rows, num_rows))
  dangling = out_degree == 0
  row["scipy 1 task R=50 ms"] = report.timing(
      lambda: scipy_ppr(transposed, dangling, seeds[:, :1], np.float32(0.5), steps[50]),
      max(1, reps // 4))
  start = time.perf_counter()  # once: at 10^6 nodes it takes minutes on 2 cores
  scipy_ppr(transposed, dangling, seeds, rho, steps["batch"])
  row["scipy batch ms/task"] = {"median_ms": (time.perf_counter() - start) * 1e3, "repeats": 1}
  for key, tasks in (("batch ms/task", batch), ("scipy batch ms/task", batch),
                     (BACK_TO_BACK, len(chained))):
    row[key] = {**row[key], "tasks": tasks, "per_task_ms": row[key]["median_ms"] / tasks}
  row["speedup batch"] = (row["scipy batch ms/task"]["median_ms"]
                          / row["batch ms/task"]["median_ms"])

  converged = scipy_ppr(transposed.astype(np.float64), dangling,
                        seeds[:, :check].astype(np.float64), rho[:check].astype(np.float64),
                        5000, REFERENCE_TOLERANCE)
  row["max L1 error"] = float(np.abs(jax_mass - converged).sum(axis=0).max())
  row["top-50 agreement"] = _top50_agreement(jax_mass, converged, seeds[:, :check])
  return row


def back_to_back_retrievals(config: retrieval.RetrievalConfig):
  """One compiled call running B one-task retrievals in turn (queries [B, 1, E], one R and W).

  Timed per retrieval it is the retrieval's own work with the per-call costs taken out (the
  dispatch, and waking the runtime's threads on a small shared CPU): set beside the one-task
  row, it shows how much of that latency is the machine's per-call overhead. It is not a
  latency: no caller gets one task's answer this way. It is also a little optimistic: XLA may
  hoist the few fusions that read only the graph out of the loop.
  """
  def run(state, queries, restart_control, weight_control):
    return jax.lax.map(lambda query: retrieval.retrieve(
        state, query, restart_control, weight_control, config).indices, queries)
  return jax.jit(run)


def _timings_in_rounds(host_state: graph_lib.GraphState,
                       calls: dict[str, tuple[Any, tuple[np.ndarray, ...], int]],
                       rounds: int) -> dict[str, dict[str, Any]]:
  """Latency of each named call (compiled function, inputs, number of timed calls), in rounds.

  Each round places the graph and inputs afresh (already on the device when timed, as in a
  serving loop) and times the calls in turn, each with its share of calls. On a small shared CPU
  the same call's median moves between processes, between rounds minutes apart and between
  fresh placements in one process, while a numpy matvec beside it holds still; so each timing
  is the median of the round medians, with every round's kept. There are at most as many rounds
  as the most calls of any entry, and every entry is timed at least once a round.
  """
  rounds = max(1, min(rounds, max(repeats for _, _, repeats in calls.values())))
  timings: dict[str, list[dict[str, float]]] = {name: [] for name in calls}
  for _ in range(rounds):
    state = jax.device_put(host_state)
    for name, (compiled, inputs, repeats) in calls.items():
      args = jax.device_put(inputs)
      timings[name].append(report.timing(lambda f=compiled, a=args: f(state, *a),
                                         max(1, repeats // rounds)))
    del state  # the next round's copy replaces it (a 10^6-node graph is ~1.5 GB)
  out = {}
  for name, timed in timings.items():
    medians = [t["median_ms"] for t in timed]
    out[name] = {"median_ms": float(np.median(medians)), "min_ms": min(t["min_ms"] for t in timed),
                 "round_medians_ms": medians, "repeats": sum(t["repeats"] for t in timed)}
  return out


def _cell(value: Any) -> Any:
  """A table cell: timings show the median (per task where batched), in ms."""
  if isinstance(value, dict):
    return round(value.get("per_task_ms", value["median_ms"]), 4)
  return value


PLOTTED = (("1 task R=10 ms", "JAX, 1 task, R=10"), ("1 task R=90 ms", "JAX, 1 task, R=90"),
           (BACK_TO_BACK, "JAX, 1 task, R=10, back to back (no per-call cost)"),
           ("batch ms/task", "JAX, batched, per task"),
           ("scipy 1 task R=50 ms", "scipy, 1 task, R=50"),
           ("scipy batch ms/task", "scipy, batched, per task"))


def plot_latency(rows: list[dict[str, Any]], path: str | pathlib.Path,
                 title: str) -> pathlib.Path:
  """Log-log per-task latency against graph size: random graphs as lines, clustered as squares."""
  fig, ax = plt.subplots(figsize=(7, 4.5))
  for (key, label), color in zip(PLOTTED, plt.rcParams["axes.prop_cycle"].by_key()["color"]):
    for graph, style in (("random", "-o"), ("clustered", "--s")):
      points = sorted((row["N"], _cell(row[key])) for row in rows if row["graph"] == graph)
      if points:
        ax.plot(*zip(*points), style, color=color, label=label if graph == "random" else None)
  if any(row["graph"] == "clustered" for row in rows):
    ax.plot([], [], "s", color="gray", label="squares: the clustered graph")
  ax.axhline(1.0, color="gray", linestyle=":", label="1 ms: the 2k-node one-task CPU target")
  ax.set(xscale="log", yscale="log", xlabel="graph nodes N", ylabel="ms per task", title=title)
  ax.grid(alpha=0.3, which="both")
  ax.legend(fontsize=7)
  fig.tight_layout()
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  fig.savefig(path, dpi=110)
  plt.close(fig)
  print(f"wrote {path}")
  return path


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--sizes", default="2000,100000,1000000",
                      help="comma-separated node counts")
  parser.add_argument("--clustered", default="2000",
                      help="comma-separated node counts of clustered graphs ('' for none)")
  parser.add_argument("--batch", type=int, default=64, help="tasks per batched retrieval")
  parser.add_argument("--tolerance", type=float, default=retrieval.RetrievalConfig.ppr_tolerance,
                      help="PageRank certified L1 error (0: always --iters steps)")
  parser.add_argument("--iters", type=int, default=retrieval.RetrievalConfig.num_iters,
                      help="most PageRank steps")
  parser.add_argument("--reps", default="300,8,2",
                      help="timed calls per size for one task (batched: a quarter)")
  parser.add_argument("--rounds", type=int, default=5,
                      help="timings split into this many rounds, each on fresh buffers")
  parser.add_argument("--out", default=None,
                      help="JSON path (default bench/results/retrieval_<backend>.json)")
  args = parser.parse_args()
  sizes = [int(size) for size in args.sizes.split(",")]
  reps = [int(rep) for rep in args.reps.split(",")]
  reps += [reps[-1]] * (len(sizes) - len(reps))
  config = retrieval.RetrievalConfig(num_iters=args.iters, ppr_tolerance=args.tolerance)
  runs = [(size, rep, False) for size, rep in zip(sizes, reps)]
  runs += [(int(size), reps[0], True) for size in args.clustered.split(",") if size]
  rows = []
  for size, rep, clustered in runs:
    rows.append(bench_size(size, args.batch, config, rep, seed=0, clustered=clustered,
                           rounds=args.rounds))
    print(f"done N={size} {rows[-1]['graph']} ({rows[-1]['build_s']} s to build the graph)",
          flush=True)
  backend = jax.default_backend()
  title = f"retrieval ({backend}; medians in ms, batched per task)"
  report.print_table(title, [{key: _cell(value) for key, value in row.items()} for row in rows])
  out = report.write_json(args.out or f"bench/results/retrieval_{backend}.json", {
      "command": "python -m bench.retrieval " + " ".join(
          f"--{key} {value}" for key, value in vars(args).items() if value is not None),
      "load_average": os.getloadavg(), "retrieval_config": dataclasses.asdict(config),
      "graph": f"random: random unit embeddings E={EMBED_DIM}, K_nn={K_NN} random links both "
               f"ways; clustered: graph.insert of {CLUSTERS} families of units",
      "rows": rows})
  plot_latency(rows, out.with_suffix(".png"), title)


if __name__ == "__main__":
  main()
