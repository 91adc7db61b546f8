"""The ExpHarness entry points as a user runs them (SmolLM2 as copilot, executor and summarizer
on GSM-symbolic, tiny sizes): training resumes bit for bit, evaluation writes its table, a
corrupt graph file stops a resume with a clear error, and an unreachable executor or a copilot
that writes no tag are counted failures that do not stop the run."""

import json
import pathlib
import re

import numpy as np
import pytest

from memex_jax.runs import log as run_log

TINY = ("--config.tasks.per_suite=6", "--config.tasks.eval_per_suite=2",
        "--config.tasks.cold_start=1", "--config.batch_size=2", "--config.tasks.max_tokens=16",
        "--config.copilot.max_tokens=8", "--config.summarizer.max_tokens=16",
        "--config.executor.cache_length=512", "--config.copilot_cache_length=512",
        "--config.ppo.seq_len=384")
pytestmark = pytest.mark.slow


def _train(entry_point, workdir: pathlib.Path, iterations: int, *flags: str):
  return entry_point("expharness_ppo", f"--config.workdir={workdir}",
                     f"--config.num_iterations={iterations}", *TINY, *flags,
                     config="expharness")


def _learning_rows(workdir: pathlib.Path) -> list[dict]:
  rows = run_log.read_log(workdir / run_log.METRICS_FILE, kind="train")
  return [{k: v for k, v in r.items() if not k.startswith("time/") and k != "harness_fraction"}
          for r in rows]


def test_training_resumes_bit_for_bit_and_evaluation_writes_its_table(entry_point, tmp_path):
  straight, resumed = tmp_path / "straight", tmp_path / "resumed"
  run = _train(entry_point, straight, 2)
  assert run.returncode == 0, run.stderr[-3000:]
  for iterations in (1, 2):
    run = _train(entry_point, resumed, iterations)
    assert run.returncode == 0, run.stderr[-3000:]
  assert "resuming at iteration 1" in run.stdout
  # orbax's save/restore INFO lines (through absl) stay out of the run's output.
  assert not re.findall(r"^I\d{4} .*", run.stderr, re.MULTILINE), run.stderr[-2000:]
  assert _learning_rows(resumed) == _learning_rows(straight)
  with (np.load(straight / "graph" / "step_2.npz") as a,
        np.load(resumed / "graph" / "step_2.npz") as b):
    assert sorted(a.files) == sorted(b.files)
    for name in a.files:
      np.testing.assert_array_equal(a[name], b[name], err_msg=name)

  run = entry_point("expharness_eval", f"--config.workdir={straight}", *TINY, config="expharness")
  assert run.returncode == 0, run.stderr[-3000:]
  assert not re.findall(r"^I\d{4} .*", run.stderr, re.MULTILINE), run.stderr[-2000:]
  results = json.loads((straight / "eval" / "results.json").read_text())
  rows = {r["label"]: r for r in results["rows"]}
  assert len(results["tasks"]) == 2
  for method in ("no_memory", "flat_top_k", "expharness", "no_diffusion", "no_utility_ranking"):
    assert rows[method]["suites"]["gsm_symbolic"]["n"] == 2, rows[method]
    assert 0.0 <= rows[method]["average"] <= 1.0, rows[method]
  assert "not run" in rows["flat"]["note"]  # its own training run was not given
  assert set(results["expharness_minus"]) == {"no_memory", "flat_top_k", "no_diffusion",
                                              "no_utility_ranking"}
  records = [json.loads(line) for line in (straight / "eval" / "tasks.jsonl").open()]
  assert len(records) == 5 * 2 and all("response" in r for r in records)
  assert all("copilot" in r for r in records if r["method"] == "expharness")
  assert (straight / "eval" / "evaluation.png").stat().st_size > 0
  assert "no_memory" in (straight / "eval" / "table.md").read_text()

  victim = straight / "graph" / "step_2.npz"
  victim.write_bytes(victim.read_bytes()[:100])
  run = _train(entry_point, straight, 3)
  assert run.returncode != 0 and "cannot resume from checkpoint 2" in run.stderr, run.stderr[-2000:]


def test_an_unreachable_executor_and_a_tagless_copilot_are_counted(entry_point, tmp_path):
  # Port 9 (discard) has no server on loopback; two copilot tokens cannot hold a tag.
  run = _train(entry_point, tmp_path, 1, "--config.executor.kind=http",
               "--config.endpoint.base_url=http://127.0.0.1:9/v1", "--config.endpoint.timeout_s=2",
               "--config.endpoint.max_retries=0", "--config.copilot.reply_prefix=",
               "--config.copilot.max_tokens=2")
  assert run.returncode == 0, run.stderr[-3000:]
  [row] = run_log.read_log(tmp_path / run_log.METRICS_FILE, kind="train")
  assert row["tasks_failed"] == 2 and row["executor_errors"] == 2
  assert row["fallbacks"] == 2 and row["total/fallbacks"] == 2
