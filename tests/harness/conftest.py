"""Static tasks for the executor tests: BIG-bench object_counting-style records, exact match."""

import pytest

from memex_jax.envs.static.sources import TaskRecord


def _counting_record(index: int, question: str, answer: str) -> TaskRecord:
  return TaskRecord(id=f"object_counting/{index}", suite="object_counting",
                    prompt=f"{question}\nAnswer with the number only.", answer=answer,
                    metadata={"metric": "exact_str_match", "targets": [answer]})


@pytest.fixture(scope="session")
def counting_record():
  """Makes a record scored by BIG-bench exact_str_match: (index, question, answer) -> record."""
  return _counting_record


@pytest.fixture(scope="session")
def counting_records():
  """Three short counting questions; the first is about cats' legs (answer 8)."""
  return (_counting_record(0, "How many legs do two cats have?", "8"),
          _counting_record(1, "I have a pen and two cups. How many objects do I have?", "3"),
          _counting_record(2, "I have a car. How many objects do I have?", "1"))
