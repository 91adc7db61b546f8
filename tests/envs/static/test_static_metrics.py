"""Official metrics: known-correct answers pass, known-wrong ones fail, pass@k is unbiased."""

import itertools
import math

import pytest

from memex_jax.envs.static import metrics
from memex_jax.envs.static import sources


@pytest.fixture(scope="module")
def humaneval():
  return list(sources.humaneval_records())


def _record(suite: str, index: int = 0) -> sources.TaskRecord:
  records = sources.bigbench_records(suite)
  return next(itertools.islice(records, index, None))


@pytest.mark.parametrize("n,c,k", [(10, 3, 1), (10, 3, 5), (20, 0, 4), (5, 5, 2), (7, 2, 6)])
def test_pass_at_k_equals_the_combinatorial_formula(n, c, k):
  exact = 1.0 - math.comb(n - c, k) / math.comb(n, k)
  assert metrics.pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12)


def test_pass_at_k_rejects_impossible_counts():
  with pytest.raises(ValueError, match="n=3, c=4, k=1"):
    metrics.pass_at_k(3, 4, 1)


def test_humaneval_canonical_solutions_pass_and_wrong_ones_fail(humaneval):
  for record in humaneval[:6]:
    verdict = metrics.score(record, record.answer)
    assert verdict.passed, (record.id, verdict.detail)
  wrong = metrics.score(humaneval[0], "    return False\n")
  assert not wrong.passed and "AssertionError" in wrong.detail


def test_humaneval_accepts_a_whole_fenced_function(humaneval):
  record = humaneval[0]
  completion = ("Here it is:\n```python\ndef has_close_elements(numbers, threshold):\n"
                "    return any(abs(a - b) < threshold for i, a in enumerate(numbers)\n"
                "               for j, b in enumerate(numbers) if i != j)\n```")
  assert metrics.score(record, completion).passed


def test_humaneval_pass_at_k_runs_each_sample(humaneval):
  record = humaneval[2]
  samples = [record.answer, "    return 0.0\n", "    return number % 1.0\n",
             "    while True: pass\n"]
  limits = metrics.HUMANEVAL_LIMITS.__class__(wall_time_s=2.0, cpu_time_s=3)
  result = metrics.humaneval_pass_at_k(record, samples, ks=(1, 4), limits=limits)
  assert result == {1: pytest.approx(0.5), 4: 1.0}


@pytest.mark.slow
def test_every_humaneval_canonical_solution_passes(humaneval):
  failed = [r.id for r in humaneval if not metrics.score(r, r.answer).passed]
  assert not failed


def test_mmlu_exact_letter_match():
  record = sources.mmlu_records()[0][0]
  wrong = next(letter for letter in "ABCD" if letter != record.answer)
  chosen = record.metadata["choices"]["ABCD".index(record.answer)]
  for answer in (record.answer, f"({record.answer})", f"The answer is {record.answer}.",
                 f"The correct answer is ({record.answer}) {chosen}.\nBecause ..."):
    assert metrics.score(record, answer).passed, answer
  assert not metrics.score(record, wrong).passed
  assert not metrics.score(record, f"The correct answer is ({wrong}) ...").passed
  assert not metrics.score(record, "I am not sure").passed


def test_gsm_symbolic_uses_the_reasoning_gym_verifier():
  record = next(sources.gsm_symbolic_records(size=1, seed=0))
  worked = f"{record.metadata['answer_cot']}\n{record.answer}"
  assert metrics.score(record, worked).passed
  assert metrics.score(record, f"<answer>{record.answer}</answer>").passed
  off_by_one = metrics.score(record, str(int(float(record.answer)) + 1))
  assert not off_by_one.passed and off_by_one.value == pytest.approx(0.01)  # reasoning-gym's.
  assert metrics.score(record, "no idea").value == 0.0


def test_multiple_choice_grade_by_letter_text_or_prefix(bigbench_files):
  record = _record("logical_deduction", 5)
  choices, scores = record.metadata["choices"], record.metadata["target_scores"]
  right = next(c for c in choices if scores[c] == 1)
  wrong = next(c for c in choices if scores[c] == 0)
  assert metrics.score(record, record.answer).passed
  assert metrics.score(record, right).passed
  assert not metrics.score(record, wrong).passed
  assert metrics.score(record, "gibberish").detail == "no option recognised"


def test_strategyqa_scores_the_yes_no_prefix(bigbench_files):
  record = _record("strategyqa")
  right = max(record.metadata["target_scores"], key=record.metadata["target_scores"].get)
  wrong = "No" if right == "Yes" else "Yes"
  assert metrics.score(record, f"{right}. Because of the seasons.").passed
  assert metrics.score(record, right.lower()).passed
  assert not metrics.score(record, f"{wrong}, never.").passed
  assert not metrics.score(record, "Yesterday it was cold.").passed  # Not the option "Yes".


def test_object_counting_exact_string_match_after_bigbench_postprocessing(bigbench_files):
  record = _record("object_counting")
  assert record.metadata["targets"] == ["three", "3"]
  assert metrics.score(record, "3").passed and metrics.score(record, " three.\nmore").passed
  assert not metrics.score(record, "4").passed
  assert not metrics.score(record, "3 instruments").passed
