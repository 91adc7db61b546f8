"""The ExpHarness entry points end to end on tiny settings (SmolLM2, GSM-symbolic, orbax): a run
resumed after one iteration ends bit for bit where the uninterrupted run ends; bad input (an
unreachable executor, a copilot that cannot emit a tag, a corrupt graph file) is counted or a
clear error; the evaluation writes its table."""

import json
import zipfile

import jax
import numpy as np
import pytest

TINY = ("--config.tasks.per_suite=6", "--config.tasks.eval_per_suite=2",
        "--config.tasks.cold_start=1", "--config.tasks.max_tokens=4", "--config.batch_size=1",
        "--config.copilot.max_tokens=6", "--config.summarizer.max_tokens=12",
        "--config.ppo.seq_len=384", "--config.copilot_cache_length=384",
        "--config.executor.cache_length=512")
# On a loaded 2-core machine one tiny iteration takes minutes (SmolLM2's forward, backward and
# compiles): each process gets 25 minutes.
TIMEOUT = 1500


@pytest.fixture
def compile_cache(tmp_path, monkeypatch):
  """The entry points' processes share XLA executables: later runs skip the compiles."""
  monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "xla_cache"))
  monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")


def _train(entry_point, *flags):
  return entry_point("expharness_ppo", *flags, config="expharness", timeout=TIMEOUT)


def _evaluate(entry_point, *flags):
  return entry_point("expharness_eval", *flags, config="expharness", timeout=TIMEOUT)


def _rows(workdir, kind="train"):
  rows = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  return [r for r in rows if r["kind"] == kind]


def _members(path):
  with zipfile.ZipFile(path) as archive:
    return {name: archive.read(name) for name in archive.namelist()}


def _policy(workdir):
  from experiments import expharness_eval  # pylint: disable=g-import-not-at-top
  from experiments.configs import expharness  # pylint: disable=g-import-not-at-top
  from memex_jax.harness.embeddings import MINILM_NAME  # pylint: disable=g-import-not-at-top

  class _Encoder:  # only the name is read: which encoder the graph file must come from
    name = MINILM_NAME

  params, graph = expharness_eval._load_run(expharness.get_config(), str(workdir), _Encoder)
  return params, graph


@pytest.mark.slow
def test_a_resumed_run_ends_bit_for_bit_where_an_uninterrupted_one_does(tmp_path, entry_point,
                                                                         compile_cache):
  straight, resumed = tmp_path / "straight", tmp_path / "resumed"
  run = _train(entry_point, f"--config.workdir={straight}", "--config.num_iterations=2", *TINY)
  assert run.returncode == 0, run.stderr[-3000:]
  first = _train(entry_point, f"--config.workdir={resumed}", "--config.num_iterations=1", *TINY)
  assert first.returncode == 0, first.stderr[-3000:]
  second = _train(entry_point, f"--config.workdir={resumed}", "--config.num_iterations=2", *TINY)
  assert second.returncode == 0, second.stderr[-3000:]
  assert "resuming at iteration 1" in second.stdout + second.stderr
  # The s_without of the cold-start and first-batch tasks was read back, not recomputed.
  a, b = _rows(straight), _rows(resumed)
  assert [r["step"] for r in b] == [1, 2] and len(_rows(resumed, "cold_start")) == 1
  for key in ("reward", "s_with", "s_without", "R", "W", "graph_size", "learner/value_loss"):
    assert a[1][key] == b[1][key], key
  assert (_members(straight / "graph" / "step_2.npz")
          == _members(resumed / "graph" / "step_2.npz"))
  (straight_params, _), (resumed_params, _) = _policy(straight), _policy(resumed)
  for x, y in zip(jax.tree.leaves(straight_params), jax.tree.leaves(resumed_params)):
    assert np.asarray(x).tobytes() == np.asarray(y).tobytes()
  assert (straight / "plots" / "training.png").is_file()
  assert list((straight / "tensorboard").iterdir())


@pytest.mark.slow
def test_evaluation_writes_its_table_and_stops_clearly_on_a_corrupt_graph(tmp_path, entry_point,
                                                                          compile_cache):
  workdir = tmp_path / "run"
  run = _train(entry_point, f"--config.workdir={workdir}", "--config.num_iterations=1", *TINY)
  assert run.returncode == 0, run.stderr[-3000:]
  (workdir / "graph" / "step_1.npz").rename(tmp_path / "intact.npz")
  (workdir / "graph" / "step_1.npz").write_bytes(b"not a zip file")
  broken = _evaluate(entry_point, f"--config.workdir={workdir}", *TINY,
                     "--config.eval.methods=('expharness',)")
  assert broken.returncode != 0
  assert "step_1.npz" in broken.stderr and "cannot read the experience graph" in broken.stderr
  (tmp_path / "intact.npz").replace(workdir / "graph" / "step_1.npz")
  # Evaluation of the intact run: one row per method, the construction ablations marked.
  done = _evaluate(entry_point, f"--config.workdir={workdir}", *TINY)
  assert done.returncode == 0, done.stderr[-3000:]
  results = json.loads((workdir / "eval" / "results.json").read_text())
  labels = [r["label"] for r in results["rows"]]
  assert labels == ["no_memory", "flat_top_k", "expharness", "no_similarity_filter", "flat",
                    "no_diffusion", "no_utility_ranking"]
  for row in results["rows"]:
    if "note" in row:
      assert row["label"] in ("no_similarity_filter", "flat")
    else:
      assert row["suites"]["gsm_symbolic"]["n"] == 2 and 0 <= row["average"] <= 1
  assert (workdir / "eval" / "evaluation.png").is_file()
  assert "weighted avg" in (workdir / "eval" / "table.md").read_text()


@pytest.mark.slow
def test_an_unreachable_executor_and_a_tagless_copilot_are_counted(tmp_path, entry_point,
                                                                  free_port, compile_cache):
  workdir = tmp_path / "run"
  run = _train(entry_point, f"--config.workdir={workdir}", "--config.num_iterations=1", *TINY,
               "--config.executor.kind=http",
               f"--config.endpoint.base_url=http://127.0.0.1:{free_port}/v1",
               "--config.endpoint.max_retries=0", "--config.endpoint.timeout_s=5",
               "--config.copilot.max_tokens=1", "--config.copilot.reply_prefix=")
  assert run.returncode == 0, run.stderr[-3000:]
  [started] = _rows(workdir, "cold_start")
  assert started["cold_start_failed"] == 1 and started["graph_size"] == 0
  [row] = _rows(workdir)
  assert row["tasks_failed"] == 1 and row["executor_errors"] == 1
  assert row["fallbacks"] == 1 and row["R"] == [50] and row["W"] == [50]
  assert "learner/loss" not in row  # no reward, no update
