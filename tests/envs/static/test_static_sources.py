"""Each suite's records come from its package's own data, complete and well-formed."""

import collections

from memex_jax.envs.static import sources


def test_humaneval_has_its_164_problems_with_tests():
  records = list(sources.humaneval_records())
  assert len(records) == 164 and len({r.id for r in records}) == 164
  first = records[0]
  assert first.id == "HumanEval/0" and first.metadata["entry_point"] == "has_close_elements"
  assert "def check(candidate)" in first.metadata["test"]
  assert first.metadata["code_prompt"] in first.prompt


def test_mmlu_drops_and_counts_its_malformed_rows():
  records, dropped = sources.mmlu_records()
  assert dropped == 2  # The file repeats its header line as data twice.
  assert len(records) == 14042
  assert {r.answer for r in records} == {"A", "B", "C", "D"}
  assert not any(r.metadata["choices"] == ["answer_a", "answer_b", "answer_c", "answer_d"]
                 for r in records)
  assert len({r.metadata["topic"] for r in records}) == 57


def test_mmlu_row_validation_names_what_is_wrong():
  good = {k: "x" for k in sources.MMLU_FIELDS} | {"correct_answer": "C"}
  assert sources._mmlu_row_is_valid(good)
  assert not sources._mmlu_row_is_valid(good | {"correct_answer": "answer"})
  assert not sources._mmlu_row_is_valid(good | {"answer_b": "  "})
  assert not sources._mmlu_row_is_valid({k: v for k, v in good.items() if k != "topic"})
  assert not sources._mmlu_row_is_valid(None)


def test_gsm_symbolic_is_reproducible_from_its_seed():
  first = list(sources.gsm_symbolic_records(size=8, seed=3))
  again = list(sources.gsm_symbolic_records(size=8, seed=3))
  other = list(sources.gsm_symbolic_records(size=8, seed=4))
  assert first == again and [r.prompt for r in first] != [r.prompt for r in other]
  assert all(r.answer.lstrip("-").replace(".", "", 1).isdigit() for r in first)
  assert first[0].metadata["answer_cot"].rstrip().endswith(first[0].answer)


def test_bigbench_tasks_keep_every_example_and_their_metric(bigbench_files):
  expected = {"date_understanding": (369, "multiple_choice_grade"),
              "logical_deduction": (1500, "multiple_choice_grade"),
              "object_counting": (1000, "exact_str_match"),
              "strategyqa": (2290, "multiple_choice_grade")}
  for task, (count, metric) in expected.items():
    records = list(sources.bigbench_records(task))
    assert len(records) == count and len({r.id for r in records}) == count, task
    assert {r.metadata["metric"] for r in records} == {metric}, task
  # date_understanding lists the right option first in 364 of 369 examples; shown shuffled,
  # the reference letters spread over the options.
  letters = collections.Counter(r.answer for r in sources.bigbench_records("date_understanding"))
  assert max(letters.values()) < 200
  deduction = list(sources.bigbench_records("logical_deduction"))
  assert deduction[0].prompt.startswith("The following paragraphs each describe a set of three")


def test_records_round_trip_through_their_flat_form():
  record = sources.mmlu_records()[0][0]
  flat = record.to_example()
  assert all(isinstance(v, str) for v in flat.values())
  assert sources.TaskRecord.from_example({k: v.encode() for k, v in flat.items()}) == record
