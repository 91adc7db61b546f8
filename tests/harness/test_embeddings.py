"""TextEncoder (all-MiniLM-L6-v2 in JAX) against sentence-transformers' recipe in torch."""

import json

import numpy as np
import pytest
import torch
import transformers

from memex_jax.harness import embeddings
from memex_jax.models import pretrained

# Token counts 4, 8, 8, 8, 15, 17, 18, 30, 43, 2: three length buckets (16, 32, 64).
VARIED = [
    "Hi.",
    "A man is eating food.",
    "Someone is having a meal.",
    "The stock market crashed today.",
    "Open the drawer, take the key, then unlock the door.",
    "Café au lait costs €3.50 in Zürich — naïve price?",
    "def add(a, b):\n    return a + b  # sums two numbers",
    "To heat an apple, first find it on the countertop, pick it up, carry it to the microwave, "
    "and heat it there.",
    "Lesson: when a search API returns an empty list, retry with a broader query before "
    "concluding that no item matches; many failures in earlier tasks came from giving up after "
    "the first empty page of results.",
    "",
]
SHORT = [text for i, text in enumerate(VARIED) if i in (0, 1, 2, 3, 4, 9)]  # <= 16 tokens


@pytest.fixture(scope="module")
def encoder():
  return embeddings.TextEncoder(batch_size=8)


@pytest.fixture(scope="module")
def varied_embeddings(encoder):
  return encoder.encode(VARIED)


@pytest.fixture(scope="module")
def hf_tokenizer():
  return transformers.AutoTokenizer.from_pretrained(str(pretrained.minilm_dir()))


@pytest.fixture(scope="module")
def reference(hf_tokenizer):
  """Embeds texts the sentence-transformers way in torch on CPU: AutoModel, mean pooling over
  real tokens, L2 normalisation; truncation at `max_length` tokens."""
  model = transformers.AutoModel.from_pretrained(str(pretrained.minilm_dir())).eval()

  def embed(texts: list[str], max_length: int) -> np.ndarray:
    batch = hf_tokenizer(texts, padding=True, truncation=True, max_length=max_length,
                         return_tensors="pt")
    with torch.no_grad():
      hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(mean, dim=-1).numpy()

  return embed


def test_matches_transformers_with_few_compiles(encoder, varied_embeddings, hf_tokenizer,
                                               reference):
  assert encoder.tokenize(VARIED) == hf_tokenizer(VARIED)["input_ids"]
  assert varied_embeddings.shape == (len(VARIED), 384)
  assert varied_embeddings.dtype == np.float32
  np.testing.assert_allclose(
      varied_embeddings, reference(VARIED, encoder.max_length), atol=1e-4)
  np.testing.assert_allclose(np.linalg.norm(varied_embeddings, axis=1), 1.0, atol=1e-5)
  # Ten different token counts, three forward shapes.
  assert encoder.compiled_shapes == {(8, 16), (4, 32), (1, 64)}


def test_embedding_does_not_depend_on_batch_or_padding(encoder, varied_embeddings):
  alone = encoder.encode([VARIED[1]])  # batch 1 instead of a padded batch of 8
  np.testing.assert_allclose(alone[0], varied_embeddings[1], atol=1e-5)
  repeated = SHORT + SHORT[:3]  # 9 texts: chunks of 8 and 1, order kept
  expected = varied_embeddings[[VARIED.index(text) for text in repeated]]
  np.testing.assert_allclose(encoder.encode(repeated), expected, atol=1e-5)


def test_paraphrases_are_closer_than_unrelated_text(encoder):
  triples = [  # (anchor, paraphrase, unrelated)
      ("A man is eating food.", "Someone is having a meal.", "The stock market crashed today."),
      ("Who wrote the novel Dune?", "Frank Herbert is the author of Dune.",
       "Preheat the oven to 200 degrees."),
      ("Put the mug in the microwave.", "Place the cup inside the microwave oven.",
       "The API returned a 404 error."),
  ]
  vectors = encoder.encode([text for triple in triples for text in triple]).reshape(3, 3, -1)
  related = np.einsum("nd,nd->n", vectors[:, 0], vectors[:, 1])
  unrelated = np.einsum("nd,nd->n", vectors[:, 0], vectors[:, 2])
  assert (related > unrelated + 0.2).all(), (related, unrelated)


def test_long_text_is_truncated_like_sentence_transformers(encoder, reference):
  long_texts = ["word " * 300, "word " * 400 + "tail"]
  assert [len(ids) for ids in encoder.tokenize(long_texts)] == [256, 256]
  vectors = encoder.encode(long_texts)
  np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-6)  # same first 256 tokens
  np.testing.assert_allclose(vectors, reference(long_texts, 256), atol=1e-4)


def test_is_a_swappable_encoder(encoder):
  assert isinstance(encoder, embeddings.Encoder)
  assert (encoder.name, encoder.dim) == ("sentence-transformers/all-MiniLM-L6-v2", 384)
  empty = encoder.encode([])
  assert empty.shape == (0, 384) and empty.dtype == np.float32


def test_rejects_non_string_input(encoder):
  with pytest.raises(TypeError, match="single string"):
    encoder.encode("A man is eating food.")
  with pytest.raises(TypeError, match=r"texts\[1\] is int"):
    encoder.encode(["fine", 3])


def _linked_copy(tmp_path, skip: tuple[str, ...] = ()):
  """A folder of symlinks to the MiniLM files, minus `skip`."""
  folder = tmp_path / "minilm_copy"
  folder.mkdir()
  for source in pretrained.minilm_dir().iterdir():
    if source.is_file() and source.name not in skip:
      (folder / source.name).symlink_to(source)
  return folder


def test_folder_problems_are_named(tmp_path):
  with pytest.raises(FileNotFoundError, match="no_such_model"):
    embeddings.TextEncoder(tmp_path / "no_such_model")

  folder = _linked_copy(tmp_path, skip=("tokenizer.json",))
  with pytest.raises(FileNotFoundError, match=r"minilm_copy/tokenizer\.json"):
    embeddings.TextEncoder(folder)

  (folder / "tokenizer.json").symlink_to(pretrained.minilm_dir() / "tokenizer.json")
  with pytest.raises(ValueError, match="max_position_embeddings"):
    embeddings.TextEncoder(folder, max_length=1000)
  custom = embeddings.TextEncoder(folder, max_length=32)
  assert (custom.name, custom.max_length) == ("minilm_copy", 32)

  (folder / "1_Pooling").mkdir()
  (folder / "1_Pooling" / "config.json").write_text(json.dumps(
      {"word_embedding_dimension": 384, "pooling_mode_cls_token": True,
       "pooling_mode_mean_tokens": False}))
  with pytest.raises(ValueError, match=r"1_Pooling/config\.json.*pooling_mode_mean_tokens"):
    embeddings.TextEncoder(folder)
