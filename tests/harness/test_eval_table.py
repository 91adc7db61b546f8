"""The ExpHarness evaluation table: means, SEs, paired differences and per-task records, by hand."""

import types

import numpy as np
import pytest

from memex_jax.harness import eval_table


def _tasks(*suites):
  return [types.SimpleNamespace(task_id=f"{s}/{i}", suite=s) for i, s in enumerate(suites)]


def test_paired_differences_are_task_by_task_per_suite_and_overall():
  tasks = _tasks("a", "a", "a", "b")
  scores = {"expharness": [1.0, 1.0, 0.0, 1.0], "no_memory": [0.0, 1.0, 0.0, 0.0],
            "flat_top_k": [1.0, 1.0, 0.0, 1.0]}
  diffs = eval_table.paired_differences(tasks, scores)
  assert set(diffs) == {"no_memory", "flat_top_k"}
  # Suite a: differences 1, 0, 0 -> mean 1/3, SE = std(ddof=1) / sqrt(3).
  assert diffs["no_memory"]["a"]["mean"] == pytest.approx(1 / 3)
  assert diffs["no_memory"]["a"]["se"] == pytest.approx(np.std([1, 0, 0], ddof=1) / np.sqrt(3))
  assert diffs["no_memory"]["b"] == {"mean": 1.0, "se": 0.0}
  assert diffs["no_memory"]["average"]["mean"] == pytest.approx(0.5)
  assert diffs["flat_top_k"]["average"] == {"mean": 0.0, "se": 0.0}
  table = eval_table.markdown_differences(diffs)
  assert "| no_memory | +0.333 +- 0.333 | +1.000 +- 0.000 | +0.500 +- 0.289 |" in table
  assert eval_table.markdown_differences({}) == ""


def test_task_records_name_what_the_executor_was_shown():
  tasks = _tasks("a", "a")
  results = [types.SimpleNamespace(score=1.0, response="7", detail="output '7'"),
             types.SimpleNamespace(score=0.0, response="", detail="no option recognised")]
  unit = types.SimpleNamespace(kind="skill", text="Answer with the number only.")
  decision = types.SimpleNamespace(text="<search>20:10</search>", restart=20, weight=10)
  records = eval_table.task_records("expharness", tasks, results, [[unit], []],
                                         [decision, decision])
  assert records[0] == {"method": "expharness", "task": "a/0", "score": 1.0, "response": "7",
                        "detail": "output '7'",
                        "experiences": ["[skill] Answer with the number only."],
                        "copilot": "<search>20:10</search>", "R": 20, "W": 10}
  assert records[1]["experiences"] == []
  plain = eval_table.task_records("no_memory", tasks, results, [[], []], None)
  assert "copilot" not in plain[0]


def test_table_rows_weight_the_average_by_test_instances():
  tasks = _tasks("a", "a", "a", "b")
  row = eval_table.table_rows("no_memory", tasks, [1.0, 0.0, 0.0, 1.0], [None, None, None, 4])
  assert row["suites"]["a"] == {"mean": pytest.approx(1 / 3), "n": 3, "mean_steps": None,
                                "se": pytest.approx(np.std([1, 0, 0], ddof=1) / np.sqrt(3))}
  assert row["suites"]["b"]["mean_steps"] == 4.0
  assert row["average"] == 0.5  # over the four tasks, not the mean of the suites' means (2/3)
  line = "| no_memory | 0.333 +- 0.333 (n=3) | 1.000 +- 0.000 (n=1) (4.0 steps) | 0.500 +- 0.289 |"
  assert line in eval_table.markdown([row])
