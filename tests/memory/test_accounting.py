"""Token accounting with the real SmolLM2 tokenizer."""

import pytest

from memex_jax.memory import ContextUsage, truncate_to_tokens
from memex_jax.memory.accounting import TRUNCATION_MARK


def test_text_within_budget_is_unchanged(smollm2_tokenizer):
  text = "Vault code: QXR-4821."
  budget = smollm2_tokenizer.count(text)
  assert truncate_to_tokens(smollm2_tokenizer, text, budget) == (text, False)


def test_text_over_budget_keeps_its_first_tokens(smollm2_tokenizer):
  text = " ".join(f"word{i}" for i in range(200))
  ids = smollm2_tokenizer.encode(text)
  cut, truncated = truncate_to_tokens(smollm2_tokenizer, text, 10)
  assert truncated and cut.endswith(TRUNCATION_MARK)
  assert cut == smollm2_tokenizer.decode(ids[:10]).rstrip() + TRUNCATION_MARK
  assert smollm2_tokenizer.count(cut.removesuffix(TRUNCATION_MARK)) <= 10


def test_negative_budget_is_an_error(smollm2_tokenizer):
  with pytest.raises(ValueError, match="token budget must be >= 0"):
    truncate_to_tokens(smollm2_tokenizer, "x", -1)


def test_usage_total_is_fixed_plus_working():
  assert ContextUsage(fixed=700, working=45).total == 745
