"""The official metric of each static suite, applied to one free-text answer.

- HumanEval: functional correctness. The completion is run with the problem's tests in the
  sandbox (never in-process); pass@k over n samples uses the unbiased estimator
  1 - C(n-c, k) / C(n, k) of the HumanEval paper.
- MMLU: exact match of the answer's option letter with the reference letter.
- GSM-symbolic: reasoning-gym's own verifier (`score_answer` of its gsm_symbolic dataset: the
  first number of the text it is given must equal the reference), applied to the answer's
  `<answer>...</answer>` content when present, else to its last non-empty line (so a worked
  solution ending with the result scores, as the prompt asks).
- BIG-bench multiple_choice_grade (date_understanding, logical_deduction, strategyqa): the
  task's target score of the option the answer picks. BIG-bench ranks options by log-likelihood;
  a text agent instead names an option: by its letter, by its text, or by starting with it
  (strategyqa's "Yes. <reason>" targets start with the option). No recognisable option scores 0.
- BIG-bench exact_str_match (object_counting): BIG-bench's default output post-processing (the
  first match of `[^.?!;\\n]+`, here also stripped of surrounding spaces) must equal a target.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Sequence

import numpy as np

from memex_jax.envs.static import sandbox
from memex_jax.envs.static.sources import LETTERS
from memex_jax.envs.static.sources import TaskRecord

BIGBENCH_OUTPUT_REGEX = r"[^\.\?\!\;\n]+"
HUMANEVAL_LIMITS = sandbox.SandboxLimits(wall_time_s=10.0, cpu_time_s=10)
# "C", "(C)", "The answer is C.", "The correct answer is (C) <its text>" (Qwen2.5's usual form).
_LETTER_ANSWER = re.compile(
    r"^(?:the\s+)?(?:correct\s+)?(?:answer\s*(?:is)?\s*:?\s*)?\(?([A-Z])\)?(?:[.:)]|\s|$)",
    re.IGNORECASE)
_CODE_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


@dataclasses.dataclass(frozen=True)
class Score:
  """The metric's verdict on one answer.

  Attributes:
    passed: the answer counts as correct.
    value: the metric's value for this answer (1.0 / 0.0, or a BIG-bench target score).
    detail: why, in a few words (e.g. the parsed option, the sandbox's reason).
  """

  passed: bool
  value: float
  detail: str


def pass_at_k(num_samples: int, num_correct: int, k: int) -> float:
  """Unbiased pass@k: the chance that k of n samples (c correct) include a correct one."""
  if not 0 <= num_correct <= num_samples or not 1 <= k <= num_samples:
    raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n; got n={num_samples}, "
                     f"c={num_correct}, k={k}")
  if num_samples - num_correct < k:
    return 1.0
  # C(n-c, k) / C(n, k) as a product, which never overflows.
  ratio = np.prod(1.0 - k / np.arange(num_samples - num_correct + 1, num_samples + 1))
  return float(1.0 - ratio)


def humaneval_program(record: TaskRecord, completion: str) -> str:
  """The program that checks `completion`: prompt, completion, the tests, then check(entry).

  The completion may be the official form (the function body continuing the prompt) or a whole
  function (as the prompt asks), fenced or not: a full definition comes after the prompt and so
  replaces the prompt's stub, while the prompt still supplies imports and helper functions.
  """
  meta = record.metadata
  block = _CODE_BLOCK.search(completion)
  code = block.group(1) if block else completion
  if re.search(rf"^\s*def\s+{re.escape(meta['entry_point'])}\s*\(", code, re.MULTILINE):
    body = meta["code_prompt"] + "\n\n" + code
  else:
    body = meta["code_prompt"] + code
  return f"{body}\n\n{meta['test']}\n\ncheck({meta['entry_point']})\n"


def _option_index(answer: str, choices: Sequence[str]) -> int | None:
  """The option an answer picks: by letter, by exact text, or by starting with the option."""
  text = answer.strip()
  match = _LETTER_ANSWER.match(text)
  if match and LETTERS.index(match.group(1).upper()) < len(choices):
    # A bare word equal to an option ("No") is that option, not a letter.
    if not any(text.lower().rstrip(".") == c.lower().rstrip(".") for c in choices):
      return LETTERS.index(match.group(1).upper())
  folded = text.lower()
  for i, choice in enumerate(choices):
    option = choice.lower().rstrip(".")
    if folded.rstrip(".") == option:
      return i
    if folded.startswith(option) and not folded[len(option):len(option) + 1].isalnum():
      return i
  return None


def _gsm_symbolic_verdict(record: TaskRecord, answer: str) -> Score:
  import reasoning_gym  # pylint: disable=g-import-not-at-top
  from reasoning_gym import utils  # pylint: disable=g-import-not-at-top
  final = utils.extract_answer(answer)
  if final is None:
    lines = [line for line in answer.strip().splitlines() if line.strip()]
    final = lines[-1] if lines else ""
  verifier = reasoning_gym.get_score_answer_fn("gsm_symbolic")
  value = float(verifier(final, {"answer": record.answer}))
  return Score(passed=value == 1.0, value=value, detail=f"final answer {final!r}")


def score(record: TaskRecord, answer: str,
          limits: sandbox.SandboxLimits = HUMANEVAL_LIMITS) -> Score:
  """Scores one answer to one record with the record's official metric.

  Args:
    record: the problem; `record.metadata["metric"]` selects the metric.
    answer: the agent's free-text answer (for HumanEval, the code).
    limits: sandbox limits for code execution (HumanEval only).

  Returns:
    The Score. Unparseable answers score as failures; only an unknown metric raises.
  """
  metric = record.metadata["metric"]
  if metric == "humaneval":
    result = sandbox.run_python(humaneval_program(record, answer), limits)
    detail = result.reason if result.passed else f"{result.reason}: {result.stderr[-300:]}"
    return Score(passed=result.passed, value=float(result.passed), detail=detail)
  if metric == "mmlu":
    match = _LETTER_ANSWER.match(answer.strip())
    letter = match.group(1).upper() if match else None
    passed = letter == record.answer
    return Score(passed=passed, value=float(passed), detail=f"option {letter}")
  if metric == "gsm_symbolic":
    return _gsm_symbolic_verdict(record, answer)
  if metric == "multiple_choice_grade":
    choices = record.metadata["choices"]
    target_scores = record.metadata["target_scores"]
    index = _option_index(answer, choices)
    if index is None:
      return Score(passed=False, value=0.0, detail="no option recognised")
    value = float(target_scores[choices[index]])
    return Score(passed=value == max(target_scores.values()), value=value,
                 detail=f"option {LETTERS[index]}: {choices[index]}")
  if metric == "exact_str_match":
    match = re.search(BIGBENCH_OUTPUT_REGEX, answer)
    output = match.group(0).strip() if match else ""
    passed = output in record.metadata["targets"]
    return Score(passed=passed, value=float(passed), detail=f"output {output!r}")
  raise ValueError(f"record {record.id}: unknown metric {metric!r}")


def humaneval_pass_at_k(record: TaskRecord, completions: Sequence[str], ks: Sequence[int],
                        limits: sandbox.SandboxLimits = HUMANEVAL_LIMITS) -> dict[int, float]:
  """pass@k of n sampled completions of one HumanEval problem, each run in the sandbox."""
  num_correct = sum(score(record, c, limits).passed for c in completions)
  return {k: pass_at_k(len(completions), num_correct, k) for k in ks}
