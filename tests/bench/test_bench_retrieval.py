"""The retrieval benchmark runs end to end and its accuracy columns check what they claim."""

import numpy as np
import pytest

from bench import retrieval as bench_retrieval
from memex_jax.harness import graph as graph_lib
from memex_jax.harness import retrieval


def test_synthetic_graph_links_each_node_to_k_nn_earlier_nodes_both_ways():
  state = bench_retrieval.synthetic_graph(300, seed=0)
  senders, receivers = graph_lib.live_edges(state)
  k = bench_retrieval.K_NN
  assert len(senders) == 2 * (k * 300 - sum(k - i for i in range(k)))  # node i < k has i
  links = state.links.rows
  owned = links[:300][links[:300] != 300]
  assert owned.size == len(senders) // 2
  assert all(len(set(row[row != 300])) == (row != 300).sum() for row in links)  # distinct
  assert sorted(zip(senders.tolist(), receivers.tolist())) == sorted(
      zip(receivers.tolist(), senders.tolist()))


def test_bench_size_row_reports_certified_accuracy_and_step_counts():
  config = retrieval.RetrievalConfig()
  row = bench_retrieval.bench_size(400, batch=4, config=config, reps=6, seed=0, rounds=3)
  assert row["max L1 error"] <= config.ppr_tolerance
  assert row["top-50 agreement"] >= 0.9
  steps = [int(s) for s in row["steps R=10/50/90/batch"].split("/")]
  assert steps[0] > steps[1] > steps[2] >= 1  # a smaller restart needs more steps
  for key in ("1 task R=10 ms", "batch ms/task", "scipy 1 task R=50 ms"):
    assert np.isfinite(row[key]["median_ms"]) and row[key]["median_ms"] > 0
  # One-task rows: 3 rounds of 2 calls, the median of the round medians, the spread shown.
  single = row["1 task R=10 ms"]
  assert len(single["round_medians_ms"]) == 3 and single["repeats"] == 6
  assert single["median_ms"] == np.median(single["round_medians_ms"])
  assert 0 < single["min_ms"] <= min(single["round_medians_ms"])
  low, high = (float(v) for v in row["R=10 rounds ms"].split("-"))
  assert low == pytest.approx(min(single["round_medians_ms"]), rel=1e-2) and high >= low
  # The batch (a quarter of the calls, at least one a round) is timed in the same rounds.
  batched = row["batch ms/task"]
  assert len(batched["round_medians_ms"]) == 3 and batched["repeats"] == 3
  assert batched["per_task_ms"] == pytest.approx(batched["median_ms"] / 4)
  # Back-to-back: the 4 tasks' one-task retrievals in one call, per retrieval, same rounds.
  chained = row[bench_retrieval.BACK_TO_BACK]
  assert len(chained["round_medians_ms"]) == 3 and chained["repeats"] == 3
  assert chained["tasks"] == 4 and chained["per_task_ms"] == pytest.approx(chained["median_ms"] / 4)
  order = [list(row).index(key) for key in (
      "1 task R=90 ms", "R=10 rounds ms", bench_retrieval.BACK_TO_BACK, "batch ms/task")]
  assert order == sorted(order)


def test_back_to_back_row_chains_at_most_its_task_count_of_the_batch():
  row = bench_retrieval.bench_size(200, batch=bench_retrieval.BACK_TO_BACK_TASKS + 2,
                                   config=retrieval.RetrievalConfig(), reps=1, seed=0)
  chained, batched = row[bench_retrieval.BACK_TO_BACK], row["batch ms/task"]
  assert chained["tasks"] == bench_retrieval.BACK_TO_BACK_TASKS
  assert batched["tasks"] == bench_retrieval.BACK_TO_BACK_TASKS + 2
  assert chained["per_task_ms"] == pytest.approx(
      chained["median_ms"] / bench_retrieval.BACK_TO_BACK_TASKS)


def test_back_to_back_call_retrieves_what_one_task_calls_do():
  state = bench_retrieval.synthetic_graph(300, seed=0)
  queries = np.random.default_rng(0).standard_normal((3, bench_retrieval.EMBED_DIM))
  config = retrieval.RetrievalConfig()
  restart, weight = np.array([10], np.int32), np.array([40], np.int32)
  run = bench_retrieval.back_to_back_retrievals(config)
  chained = run(state, queries[:, None], restart, weight)
  assert chained.shape == (3, 1, config.top_k)
  for query, got in zip(queries, np.asarray(chained)):
    want = retrieval.retrieve(state, query[None], restart, weight, config).indices
    np.testing.assert_array_equal(got, np.asarray(want))


def test_latency_plot_is_a_png(tmp_path):
  rows = [bench_retrieval.bench_size(n, batch=2, config=retrieval.RetrievalConfig(), reps=1,
                                     seed=0) for n in (200, 400)]
  path = bench_retrieval.plot_latency(rows, tmp_path / "plots" / "retrieval.png", "cpu")
  assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


def test_clustered_row_is_built_by_insertions_and_keeps_its_accuracy():
  state, queries = bench_retrieval.clustered_graph(300, batch=4, seed=0)
  assert state.num_nodes == 300 and queries.shape == (4, bench_retrieval.EMBED_DIM)
  # Families: a query's best match is far more similar than a typical node.
  unit = queries / np.linalg.norm(queries, axis=1, keepdims=True)
  sims = unit @ np.asarray(state.nodes.embedding)[:300].T
  assert (sims.max(axis=1) > 0.3).all() and abs(np.median(sims)) < 0.1
  row = bench_retrieval.bench_size(300, batch=4, config=retrieval.RetrievalConfig(), reps=2,
                                   seed=0, clustered=True)
  assert row["graph"] == "clustered" and row["edges"] == state.num_edges
  assert row["max L1 error"] <= retrieval.RetrievalConfig().ppr_tolerance
