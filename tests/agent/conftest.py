"""The ChatML renderer over the real SmolLM2 tokenizer, once per session."""

import pytest

from memex_jax.agent import ChatRenderer


@pytest.fixture(scope="session")
def renderer(smollm2_tokenizer) -> ChatRenderer:
  return ChatRenderer(smollm2_tokenizer)
