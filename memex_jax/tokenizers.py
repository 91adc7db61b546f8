"""One tokenizer facade over HF `tokenizers` (folders and GGUF metadata) and sentencepiece files.

`Tokenizer.load(path)` picks the backend from the path:
- a `.gguf` file: the vocabulary, merges and special tokens stored in its metadata, rebuilt as a
  byte-level BPE `tokenizers.Tokenizer` (ids equal `transformers.AutoTokenizer(gguf_file=...)`,
  without reading the tensors and without torch);
- a `.model` file: sentencepiece itself, the reference implementation of that file;
- a folder: `tokenizer.json` (through transformers) or else a sentencepiece `tokenizer.model`.

Special tokens written in text (`<|im_start|>`) encode to their single ids on the HF backend, as
in transformers. Sentencepiece never parses control tokens out of text (neither does the library
nor mistral-common, which owns the reference `.model` files): add them as ids.
"""

from __future__ import annotations

import abc
import json
import os
import pathlib
import shutil
from collections.abc import Sequence
from typing import Any

import sentencepiece
import tokenizers
from tokenizers import decoders, models, pre_tokenizers

from memex_jax.models import gguf_file

PathLike = str | os.PathLike

_GGUF_CONTROL, _GGUF_USER_DEFINED = 3, 4  # `tokenizer.ggml.token_type` values

# `tokenizer.ggml.pre` -> the split regex its BPE merges were learned with. None keeps GPT-2's
# regex (ByteLevel's own). A value missing here is refused rather than guessed.
_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_GGUF_PRE_SPLITS = {
    "default": None, "gpt-2": None, "smollm": None,
    "llama3": _LLAMA3_SPLIT, "llama-v3": _LLAMA3_SPLIT, "llama-bpe": _LLAMA3_SPLIT,
    "qwen2": _QWEN2_SPLIT, "deepseek-r1-qwen": _QWEN2_SPLIT,
}


def _byte_to_char() -> dict[int, str]:
  """GPT-2's reversible byte -> printable character map; byte-level vocabularies use it."""
  printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
               *range(ord("®"), ord("ÿ") + 1)]
  shifted = [b for b in range(256) if b not in printable]
  table = {b: chr(b) for b in printable}
  table.update({b: chr(256 + n) for n, b in enumerate(shifted)})
  return table


def _gguf_field(metadata: dict[str, Any], key: str, path: pathlib.Path) -> Any:
  if key not in metadata:
    raise ValueError(f"{path}: GGUF metadata has no `{key}`, so it carries no usable tokenizer.")
  return metadata[key]


def _byte_level_bpe_from_gguf(metadata: dict[str, Any], path: pathlib.Path) -> tokenizers.Tokenizer:
  """The byte-level BPE (`tokenizer.ggml.model == "gpt2"`) that the metadata describes."""
  tokens = _gguf_field(metadata, "tokenizer.ggml.tokens", path)
  merges = _gguf_field(metadata, "tokenizer.ggml.merges", path)
  pre = metadata.get("tokenizer.ggml.pre", "default")
  if pre not in _GGUF_PRE_SPLITS:
    raise ValueError(f"{path}: `tokenizer.ggml.pre` is {pre!r}; its split regex is unknown here "
                     f"(known: {sorted(_GGUF_PRE_SPLITS)}), so its ids could silently differ.")
  spelling = _byte_to_char()
  alphabet = set(spelling.values())
  # Tokens outside the byte alphabet (raw UTF-8 in some files) are respelled as their bytes.
  vocab = {t if set(t) <= alphabet else "".join(spelling[b] for b in t.encode("utf-8")): i
           for i, t in enumerate(tokens)}
  bpe = models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) for m in merges], dropout=None,
                   continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False)
  tok = tokenizers.Tokenizer(bpe)
  split = _GGUF_PRE_SPLITS[pre]
  if split is None:
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  else:
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(tokenizers.Regex(split), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
  tok.decoder = decoders.ByteLevel()
  token_types = metadata.get("tokenizer.ggml.token_type") or [0] * len(tokens)
  # A CONTROL token spelled outside the byte alphabet is a mislabel; adding it would grow the vocab.
  tok.add_special_tokens([
      tokenizers.AddedToken(t, special=True, normalized=False)
      for t, kind in zip(tokens, token_types) if kind == _GGUF_CONTROL and set(t) <= alphabet])
  tok.add_tokens([tokenizers.AddedToken(t, special=False, normalized=False)
                  for t, kind in zip(tokens, token_types)
                  if kind == _GGUF_USER_DEFINED and t in vocab])
  return tok


def _check_ids(ids: Sequence[int], vocab_size: int, name: str) -> None:
  bad = [i for i in ids if not 0 <= i < vocab_size]
  if bad:
    raise IndexError(f"{name}: ids {bad[:5]} are outside [0, {vocab_size}).")


class Tokenizer(abc.ABC):
  """Facade over one tokenizer backend; build it with `load` or the `from_*` constructors.

  Attributes:
    name_or_path: where the tokenizer was read from.
  """

  name_or_path: str

  @staticmethod
  def load(path: PathLike) -> Tokenizer:
    """A `.gguf` file, a sentencepiece `.model` (or `.model.vN`) file, or a tokenizer folder."""
    path = pathlib.Path(path)
    if not path.exists():
      raise FileNotFoundError(f"Tokenizer path not found: {path}")
    if path.is_dir():
      return Tokenizer.from_pretrained(path)
    if path.suffix == ".gguf":
      return Tokenizer.from_gguf(path)
    if ".model" in path.suffixes:  # also mistral-common's versioned `tokenizer.model.v1`
      return Tokenizer.from_sentencepiece(path)
    raise ValueError(f"{path}: cannot tell the tokenizer format; expected a folder, a .gguf file "
                     "or a sentencepiece .model file.")

  @staticmethod
  def from_pretrained(folder: PathLike) -> Tokenizer:
    """A HF tokenizer folder (`tokenizer.json`) or a sentencepiece `tokenizer.model` folder."""
    folder = pathlib.Path(folder)
    if not folder.is_dir():
      raise FileNotFoundError(f"Tokenizer folder not found: {folder}")
    if not (folder / "tokenizer.json").is_file() and (folder / "tokenizer.model").is_file():
      return Tokenizer.from_sentencepiece(folder / "tokenizer.model")
    if not any((folder / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
      raise FileNotFoundError(f"{folder} holds no tokenizer.json, tokenizer_config.json or "
                              "tokenizer.model.")
    import transformers  # pylint: disable=g-import-not-at-top  # heavy; only HF backends need it
    try:
      hf = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except Exception as e:  # tokenizers/json/transformers each raise their own kinds
      raise ValueError(f"{folder}: tokenizer files could not be read "
                       f"({type(e).__name__}: {e}).") from e
    return HFTokenizer(hf, str(folder))

  @staticmethod
  def from_gguf(path: PathLike) -> Tokenizer:
    """The tokenizer stored in a GGUF file's metadata (byte-level BPE vocabularies)."""
    path = pathlib.Path(path)
    metadata = gguf_file.read_header(path).metadata
    kind = _gguf_field(metadata, "tokenizer.ggml.model", path)
    if kind != "gpt2":
      raise ValueError(f"{path}: `tokenizer.ggml.model` is {kind!r}; only byte-level BPE ('gpt2') "
                       "GGUF tokenizers are supported (llama, qwen2, qwen3 families).")
    backend = _byte_level_bpe_from_gguf(metadata, path)
    tokens = metadata["tokenizer.ggml.tokens"]

    def token(field: str) -> str | None:
      i = metadata.get(f"tokenizer.ggml.{field}")
      return tokens[i] if i is not None and 0 <= i < len(tokens) else None

    import transformers  # pylint: disable=g-import-not-at-top  # for chat templates and saving
    hf = transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token=token("bos_token_id"), eos_token=token("eos_token_id"),
        unk_token=token("unknown_token_id"), pad_token=token("padding_token_id"),
        add_bos_token=bool(metadata.get("tokenizer.ggml.add_bos_token", False)),
        add_eos_token=bool(metadata.get("tokenizer.ggml.add_eos_token", False)),
        chat_template=metadata.get("tokenizer.chat_template"), name_or_path=str(path))
    return HFTokenizer(hf, str(path))

  @staticmethod
  def from_sentencepiece(path: PathLike) -> Tokenizer:
    """A sentencepiece `.model` file, run by sentencepiece itself."""
    path = pathlib.Path(path)
    if not path.is_file():
      raise FileNotFoundError(f"Sentencepiece model file not found: {path}")
    processor = sentencepiece.SentencePieceProcessor()
    try:
      processor.Load(str(path))
    except (OSError, RuntimeError) as e:
      raise ValueError(f"{path} is not a valid sentencepiece model ({e}).") from e
    return SentencePieceTokenizer(processor, path)

  # The backend-specific part.
  @abc.abstractmethod
  def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
    """Token ids of `text`; `add_special_tokens` adds what the tokenizer adds itself (e.g. BOS)."""

  @abc.abstractmethod
  def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = False) -> list[list[int]]:
    """`encode` of each text, batched in the backend."""

  @abc.abstractmethod
  def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
    """Text of `ids`; special tokens are written out unless `skip_special_tokens`."""

  @abc.abstractmethod
  def token_to_id(self, token: str) -> int | None:
    """Id of one vocabulary entry, None when absent."""

  @abc.abstractmethod
  def id_to_token(self, token_id: int) -> str:
    """Vocabulary entry of one id; IndexError outside [0, vocab_size)."""

  @property
  @abc.abstractmethod
  def vocab_size(self) -> int:
    """Number of ids, added/special tokens included: every id is in [0, vocab_size)."""

  @property
  @abc.abstractmethod
  def bos_id(self) -> int | None:
    """Beginning-of-sequence id, None when the tokenizer has none."""

  @property
  @abc.abstractmethod
  def eos_id(self) -> int | None:
    """End-of-sequence id, None when the tokenizer has none."""

  @property
  @abc.abstractmethod
  def pad_id(self) -> int | None:
    """Padding id, None when the tokenizer has none."""

  def apply_chat_template(self, messages: list[dict[str, Any]],
                          tools: list[dict[str, Any]] | None = None,
                          add_generation_prompt: bool = False,
                          tokenize: bool = False) -> str | list[int]:
    """Renders `messages` (and `tools`) with the tokenizer's own jinja chat template."""
    raise ValueError(f"{self.name_or_path}: this tokenizer has no `chat_template`.")

  @abc.abstractmethod
  def save_pretrained(self, out_dir: PathLike) -> pathlib.Path:
    """Writes files `transformers.AutoTokenizer.from_pretrained(out_dir)` loads to equal ids."""

  # Shared by every backend.
  def count(self, text: str) -> int:
    """Number of tokens `text` encodes to (no special tokens added), for context accounting."""
    return len(self.encode(text))

  def check_matches(self, vocab_size: int, source: str) -> None:
    """Raises ValueError unless every id of this tokenizer indexes a row of the embedding table.

    Args:
      vocab_size: rows of the model's embedding table (its config's `vocab_size`).
      source: the weights file/config it came from, named in the error.
    """
    if vocab_size <= 0:
      raise ValueError(f"{source}: field `vocab_size` must be positive, got {vocab_size}.")
    if self.vocab_size > vocab_size:
      raise ValueError(
          f"{source}: field `vocab_size` is {vocab_size}, but the tokenizer {self.name_or_path} "
          f"has {self.vocab_size} tokens; ids >= {vocab_size} have no embedding row, so this "
          "tokenizer does not belong to these weights.")

  def __repr__(self) -> str:
    return f"{type(self).__name__}({self.name_or_path!r}, vocab_size={self.vocab_size})"


class HFTokenizer(Tokenizer):
  """Backend: a transformers fast tokenizer; encoding runs on its Rust `tokenizers.Tokenizer`."""

  def __init__(self, hf: Any, name_or_path: str):
    self.hf = hf  # transformers.PreTrainedTokenizerFast: chat templates, decode, save.
    self._fast: tokenizers.Tokenizer = hf.backend_tokenizer
    self.name_or_path = name_or_path

  def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
    return self._fast.encode(text, add_special_tokens=add_special_tokens).ids

  def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = False) -> list[list[int]]:
    encodings = self._fast.encode_batch(list(texts), add_special_tokens=add_special_tokens)
    return [e.ids for e in encodings]

  def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
    _check_ids(ids, self.vocab_size, self.name_or_path)
    return self.hf.decode(list(ids), skip_special_tokens=skip_special_tokens)

  def token_to_id(self, token: str) -> int | None:
    return self._fast.token_to_id(token)

  def id_to_token(self, token_id: int) -> str:
    token = self._fast.id_to_token(token_id) if 0 <= token_id < self.vocab_size else None
    if token is None:
      raise IndexError(f"{self.name_or_path}: id {token_id} is outside [0, {self.vocab_size}).")
    return token

  @property
  def vocab_size(self) -> int:
    return len(self.hf)

  @property
  def bos_id(self) -> int | None:
    return self.hf.bos_token_id

  @property
  def eos_id(self) -> int | None:
    return self.hf.eos_token_id

  @property
  def pad_id(self) -> int | None:
    return self.hf.pad_token_id

  def apply_chat_template(self, messages: list[dict[str, Any]],
                          tools: list[dict[str, Any]] | None = None,
                          add_generation_prompt: bool = False,
                          tokenize: bool = False) -> str | list[int]:
    if not self.hf.chat_template:
      return super().apply_chat_template(messages, tools, add_generation_prompt, tokenize)
    text = self.hf.apply_chat_template(messages, tools=tools,
                                       add_generation_prompt=add_generation_prompt, tokenize=False)
    # The template writes the special tokens itself, so none are added on top.
    return self.encode(text) if tokenize else text

  def save_pretrained(self, out_dir: PathLike) -> pathlib.Path:
    out_dir = pathlib.Path(out_dir)
    self.hf.save_pretrained(str(out_dir))
    return out_dir


def _id_or_none(token_id: int) -> int | None:
  """Sentencepiece writes an absent special id as -1."""
  return token_id if token_id >= 0 else None


class SentencePieceTokenizer(Tokenizer):
  """Backend: a sentencepiece model; `add_special_tokens` prepends BOS (Llama/Mistral style)."""

  def __init__(self, processor: sentencepiece.SentencePieceProcessor, path: pathlib.Path):
    self.processor = processor
    self.path = path
    self.name_or_path = str(path)

  def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
    ids = self.processor.Encode(text)
    return [self.bos_id, *ids] if add_special_tokens and self.bos_id is not None else ids

  def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = False) -> list[list[int]]:
    batch = self.processor.Encode(list(texts))
    if add_special_tokens and self.bos_id is not None:
      return [[self.bos_id, *ids] for ids in batch]
    return batch

  def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
    """Sentencepiece's decode; control tokens are written as their text unless skipped."""
    _check_ids(ids, self.vocab_size, self.name_or_path)
    pieces, run = [], []
    for token_id in map(int, ids):
      if not self.processor.IsControl(token_id):
        run.append(token_id)
      elif not skip_special_tokens:
        pieces += [self.processor.Decode(run), self.processor.IdToPiece(token_id)]
        run = []
    return "".join([*pieces, self.processor.Decode(run)])

  def token_to_id(self, token: str) -> int | None:
    token_id = self.processor.PieceToId(token)
    # Unknown pieces map to the unk id; only the unk piece itself really has it.
    return token_id if self.processor.IdToPiece(token_id) == token else None

  def id_to_token(self, token_id: int) -> str:
    if not 0 <= token_id < self.vocab_size:
      raise IndexError(f"{self.name_or_path}: id {token_id} is outside [0, {self.vocab_size}).")
    return self.processor.IdToPiece(token_id)

  @property
  def vocab_size(self) -> int:
    return self.processor.GetPieceSize()

  @property
  def bos_id(self) -> int | None:
    return _id_or_none(self.processor.bos_id())

  @property
  def eos_id(self) -> int | None:
    return _id_or_none(self.processor.eos_id())

  @property
  def pad_id(self) -> int | None:
    return _id_or_none(self.processor.pad_id())

  def save_pretrained(self, out_dir: PathLike) -> pathlib.Path:
    """Copies the model file, with a config that has transformers read control tokens as text."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(self.path, out_dir / "tokenizer.model")

    def piece(token_id: int | None) -> str | None:
      return None if token_id is None else self.processor.IdToPiece(token_id)
    config = {
        # transformers' generic sentencepiece conversion; its `LlamaTokenizer` handles leading
        # spaces differently from sentencepiece (" a" loses its "▁" piece).
        "tokenizer_class": "TokenizersBackend", "add_bos_token": self.bos_id is not None,
        "add_eos_token": False,
        "bos_token": piece(self.bos_id), "eos_token": piece(self.eos_id),
        "unk_token": piece(_id_or_none(self.processor.unk_id())), "pad_token": piece(self.pad_id),
        # Sentencepiece reads "<s>" in text as characters; so must transformers, for equal ids.
        "split_special_tokens": True,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    return out_dir
