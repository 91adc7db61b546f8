"""Tests for memex_jax.tokenizers against transformers and sentencepiece on real tokenizer files.

References:
- GGUF (SmolLM2-135M-Instruct): `transformers.AutoTokenizer.from_pretrained(dir, gguf_file=...)`.
- sentencepiece (mistral-common's `tokenizer.model.v1`): sentencepiece itself. The `.model` file is
  defined by that library (mistral-common encodes with it too); transformers' conversion of the
  file is a reimplementation, checked here only where the two should agree (plain text, and the
  folder `save_pretrained` writes).
"""

import os
import pathlib

import hypothesis
import pytest
from hypothesis import strategies as st

os.environ.setdefault("HF_HUB_OFFLINE", "1")

gguf = pytest.importorskip("gguf")
sentencepiece = pytest.importorskip("sentencepiece")
transformers = pytest.importorskip("transformers")

from memex_jax.models import gguf_file  # pylint: disable=g-import-not-at-top
from memex_jax.models import pretrained  # pylint: disable=g-import-not-at-top
from memex_jax.tokenizers import Tokenizer  # pylint: disable=g-import-not-at-top
from memex_jax.tokenizers import _byte_to_char  # pylint: disable=g-import-not-at-top

_BYTE_TO_CHAR = _byte_to_char()

TEXTS = [
    "Hello world",
    " leading space",
    "  two spaces and trailing  ",
    "héllo wörld, 世界 🙂 — naïve café",
    "def f(x):\n\treturn x ** 2  # square\n",
    "a\r\n\r\nb\n\n\n   c",
    "In 2024 there were 12345 cats; x=3.14159.",
    "{\"name\": \"ReadExperience\", \"arguments\": {\"index\": \"ctx_001\"}}",
    "",
    " ",
]
CHATML_TEXTS = [
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|><repo_name>x<|im_end|>",
]
TOOLS = [{
    "type": "function",
    "function": {
        "name": "ReadExperience",
        "description": "Restore an archived block of experience by its index.",
        "parameters": {"type": "object", "properties": {"index": {"type": "string"}},
                       "required": ["index"]},
    },
}]
TOOL_TEMPLATE = (
    "{% if tools %}<|im_start|>system\nTools:\n{% for t in tools %}{{ t | tojson }}\n{% endfor %}"
    "<|im_end|>\n{% endif %}{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
CONVERSATION = [
    {"role": "system", "content": "You solve tasks."},
    {"role": "user", "content": "Read block ctx_001, please."},
    {"role": "assistant", "content": "Reading it."},
]


@pytest.fixture(scope="module")
def smol_path() -> pathlib.Path:
  try:
    return pretrained.smollm2_gguf_path()
  except pretrained.PretrainedNotInstalledError as e:
    pytest.skip(str(e))


@pytest.fixture(scope="module")
def smol_reference(smol_path):
  return transformers.AutoTokenizer.from_pretrained(str(smol_path.parent), gguf_file=smol_path.name)


@pytest.fixture(scope="module")
def mistral_model() -> pathlib.Path:
  mistral_common = pytest.importorskip("mistral_common")
  return pathlib.Path(mistral_common.__file__).parent / "data" / "tokenizer.model.v1"


@pytest.fixture(scope="module")
def mistral(mistral_model) -> Tokenizer:
  return Tokenizer.load(mistral_model)


def _write_gguf(path: pathlib.Path, source: pathlib.Path, model: str = "gpt2", pre: str = "qwen2"):
  """A metadata-only GGUF holding SmolLM2's vocabulary under another pre-tokenizer and flags."""
  metadata = gguf_file.read_header(source).metadata
  token_types = list(metadata["tokenizer.ggml.token_type"])
  token_types[4] = 4  # `<reponame>` as a USER_DEFINED (added, not special) token
  writer = gguf.GGUFWriter(str(path), arch="qwen2")
  writer.add_tokenizer_model(model)
  writer.add_tokenizer_pre(pre)
  writer.add_token_list(metadata["tokenizer.ggml.tokens"])
  writer.add_token_types(token_types)
  writer.add_token_merges(metadata["tokenizer.ggml.merges"])
  writer.add_bos_token_id(1)
  writer.add_eos_token_id(2)
  writer.add_add_bos_token(True)
  writer.write_header_to_file()
  writer.write_kv_data_to_file()
  writer.write_tensors_to_file()
  writer.close()
  return path


@pytest.mark.parametrize("add_special_tokens", [False, True])
def test_gguf_ids_equal_transformers(smollm2_tokenizer, smol_reference, add_special_tokens):
  smol = smollm2_tokenizer
  texts = TEXTS + CHATML_TEXTS
  expected = [smol_reference(t, add_special_tokens=add_special_tokens)["input_ids"] for t in texts]
  assert [smol.encode(t, add_special_tokens) for t in texts] == expected
  assert smol.encode_batch(texts, add_special_tokens) == expected
  assert [smol.count(t) for t in texts] == [
      len(smol_reference(t, add_special_tokens=False)["input_ids"]) for t in texts]


def test_gguf_special_tokens_and_sizes(smollm2_tokenizer, smol_reference):
  smol = smollm2_tokenizer
  im_start, im_end = smol.token_to_id("<|im_start|>"), smol.token_to_id("<|im_end|>")
  assert smol.encode("<|im_start|>user\nhi<|im_end|>")[::4] == [im_start, im_end]
  assert smol.encode("<|im_end|>") == [im_end]
  assert (smol.bos_id, smol.eos_id, smol.pad_id) == (
      smol_reference.bos_token_id, smol_reference.eos_token_id, smol_reference.pad_token_id)
  assert smol.vocab_size == len(smol_reference) == 49152
  assert smol.id_to_token(im_end) == "<|im_end|>"
  assert smol.token_to_id("no-such-token-here") is None
  with pytest.raises(IndexError, match="49152"):
    smol.id_to_token(49152)
  with pytest.raises(IndexError, match="49152"):
    smol.decode([1, 49152])


def test_gguf_decode_round_trip(smollm2_tokenizer, smol_reference):
  smol = smollm2_tokenizer
  for text in TEXTS + CHATML_TEXTS:
    ids = smol.encode(text)
    assert smol.decode(ids) == text
    for skip in (False, True):
      assert smol.decode(ids, skip_special_tokens=skip) == (
          smol_reference.decode(ids, skip_special_tokens=skip))
  assert smol.decode(smol.encode(CHATML_TEXTS[0]), skip_special_tokens=True) == (
      "user\nWhat is 2+2?\nassistant\n")


@hypothesis.settings(max_examples=60, deadline=None, database=None)
@hypothesis.given(text=st.text(max_size=64))
def test_gguf_byte_level_round_trip_property(smollm2_tokenizer, text):
  smol = smollm2_tokenizer
  # Byte-level BPE is lossless on text whose bytes all have a token; SmolLM2's vocabulary lacks 21
  # (e.g. 0x04, 0xf1), which vanish from the ids exactly as in transformers.
  hypothesis.assume("<" not in text)  # no special-token strings
  hypothesis.assume(all(smol.token_to_id(_BYTE_TO_CHAR[b]) is not None for b in text.encode()))
  assert smol.decode(smol.encode(text)) == text


def test_gguf_pre_tokenizer_split_and_flags_equal_transformers(tmp_path, smol_path):
  path = _write_gguf(tmp_path / "qwen2_split.gguf", smol_path)
  reference = transformers.TokenizersBackend.from_pretrained(str(tmp_path), gguf_file=path.name)
  tok = Tokenizer.load(path)
  texts = TEXTS + ["IT'S 'LL THEY'RE\n\n\n  x", "<reponame>a<|im_start|>"]
  for add_special_tokens in (False, True):
    assert [tok.encode(t, add_special_tokens) for t in texts] == [
        reference(t, add_special_tokens=add_special_tokens)["input_ids"] for t in texts]
  assert tok.encode("x", add_special_tokens=True)[0] == tok.bos_id == 1
  assert tok.encode("<reponame>") == [4]  # user-defined tokens stay whole
  assert tok.decode([4, 1], skip_special_tokens=True) == "<reponame>"  # ...but are not special


@pytest.mark.parametrize("model,pre,field", [
    ("llama", "default", "tokenizer.ggml.model"),
    ("gpt2", "some-future-regex", "tokenizer.ggml.pre"),
])
def test_gguf_unsupported_tokenizer_is_refused(tmp_path, smol_path, model, pre, field):
  path = _write_gguf(tmp_path / "unsupported.gguf", smol_path, model=model, pre=pre)
  with pytest.raises(ValueError, match=field) as error:
    Tokenizer.load(path)
  assert str(path) in str(error.value)


def test_sentencepiece_equals_sentencepiece_library(mistral, mistral_model):
  reference = sentencepiece.SentencePieceProcessor(model_file=str(mistral_model))
  texts = TEXTS + ["<s>[INST] hi [/INST]</s>"]
  assert [mistral.encode(t) for t in texts] == [reference.encode(t) for t in texts]
  assert mistral.encode_batch(texts, add_special_tokens=True) == [
      [1] + reference.encode(t) for t in texts]
  assert mistral.count(texts[3]) == len(reference.encode(texts[3]))
  assert (mistral.vocab_size, mistral.bos_id, mistral.eos_id, mistral.pad_id) == (32000, 1, 2, None)
  for text in texts:
    ids = reference.encode(text)
    assert mistral.decode(ids) == reference.decode(ids)
  ids = [mistral.bos_id, *mistral.encode("Hello world"), mistral.eos_id]
  assert mistral.decode(ids) == "<s>Hello world</s>"
  assert mistral.decode(ids, skip_special_tokens=True) == reference.decode(ids) == "Hello world"
  assert mistral.token_to_id("▁Hello") == reference.piece_to_id("▁Hello")
  assert mistral.token_to_id("no-such-piece") is None
  assert mistral.id_to_token(2) == "</s>"
  assert mistral.token_to_id("<unk>") == 0
  with pytest.raises(IndexError, match="32000"):
    mistral.id_to_token(32000)
  with pytest.raises(IndexError, match="32000"):
    mistral.decode([-1])


def test_sentencepiece_plain_text_agrees_with_transformers_conversion(tmp_path, mistral,
                                                                      mistral_model):
  (tmp_path / "tokenizer.model").write_bytes(mistral_model.read_bytes())
  converted = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
  assert [mistral.encode(t) for t in TEXTS] == [
      converted(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
  # Where they part: transformers parses "<s>" out of text by default, sentencepiece never does.
  assert (mistral.encode("<s>") != [mistral.bos_id]
          == converted("<s>", add_special_tokens=False)["input_ids"])
  # a tokenizer.model folder: sentencepiece
  assert isinstance(Tokenizer.load(tmp_path), type(mistral))


def test_save_pretrained_gguf_round_trip(tmp_path, smollm2_tokenizer):
  smol = smollm2_tokenizer
  out = smol.save_pretrained(tmp_path / "smol")
  reloaded = transformers.AutoTokenizer.from_pretrained(str(out))
  texts = TEXTS + CHATML_TEXTS
  assert [reloaded(t, add_special_tokens=False)["input_ids"] for t in texts] == [
      smol.encode(t) for t in texts]
  again = Tokenizer.load(out)
  assert [again.encode(t) for t in texts] == [smol.encode(t) for t in texts]
  assert (again.bos_id, again.eos_id, again.pad_id, again.vocab_size) == (
      smol.bos_id, smol.eos_id, smol.pad_id, smol.vocab_size)
  assert again.apply_chat_template(CONVERSATION) == smol.apply_chat_template(CONVERSATION)


def test_save_pretrained_sentencepiece_round_trip(tmp_path, mistral):
  out = mistral.save_pretrained(tmp_path / "mistral")
  reloaded = transformers.AutoTokenizer.from_pretrained(str(out))
  texts = TEXTS + ["<s>[INST] hi [/INST]</s>", "a  </s> b"]
  for add_special_tokens in (False, True):
    assert [reloaded(t, add_special_tokens=add_special_tokens)["input_ids"] for t in texts] == [
        mistral.encode(t, add_special_tokens) for t in texts]
  assert [Tokenizer.load(out).encode(t) for t in texts] == [mistral.encode(t) for t in texts]


@pytest.mark.parametrize("add_generation_prompt", [False, True])
def test_chat_template_equals_transformers(smollm2_tokenizer, smol_reference,
                                           add_generation_prompt):
  smol = smollm2_tokenizer
  for messages in (CONVERSATION, CONVERSATION[1:]):
    text = smol.apply_chat_template(messages, add_generation_prompt=add_generation_prompt)
    assert text == smol_reference.apply_chat_template(
        messages, add_generation_prompt=add_generation_prompt, tokenize=False)
    assert (smol.apply_chat_template(messages, add_generation_prompt=add_generation_prompt,
                                     tokenize=True)
            == smol_reference.apply_chat_template(
                messages, add_generation_prompt=add_generation_prompt)["input_ids"])
  assert text.startswith("<|im_start|>system\n")


def test_chat_template_with_tools_equals_transformers(tmp_path, smollm2_tokenizer):
  smol = smollm2_tokenizer
  out = smol.save_pretrained(tmp_path / "tools")
  (out / "chat_template.jinja").write_text(TOOL_TEMPLATE)
  tok, reference = Tokenizer.load(out), transformers.AutoTokenizer.from_pretrained(str(out))
  with_tools = tok.apply_chat_template(CONVERSATION, tools=TOOLS, add_generation_prompt=True)
  assert with_tools == reference.apply_chat_template(
      CONVERSATION, tools=TOOLS, add_generation_prompt=True, tokenize=False)
  assert '"name": "ReadExperience"' in with_tools
  without = tok.apply_chat_template(CONVERSATION, add_generation_prompt=True)
  assert "ReadExperience" not in without and with_tools.endswith(without)


def test_no_chat_template_is_a_clear_error(mistral):
  with pytest.raises(ValueError, match="chat_template") as error:
    mistral.apply_chat_template(CONVERSATION)
  assert mistral.name_or_path in str(error.value)


def test_missing_paths_name_the_path(tmp_path):
  missing = tmp_path / "nowhere"
  for load in (Tokenizer.load, Tokenizer.from_pretrained, Tokenizer.from_gguf,
               Tokenizer.from_sentencepiece):
    with pytest.raises(FileNotFoundError, match=str(missing)):
      load(missing)
  with pytest.raises(FileNotFoundError, match="tokenizer.json"):
    Tokenizer.load(tmp_path)  # an empty folder
  (tmp_path / "weights.bin").write_bytes(b"\0" * 8)
  with pytest.raises(ValueError, match="weights.bin"):
    Tokenizer.load(tmp_path / "weights.bin")


def test_corrupt_files_name_the_file(tmp_path, smol_path, mistral_model):
  truncated = tmp_path / "truncated.gguf"
  with open(smol_path, "rb") as f:
    truncated.write_bytes(f.read(300_000))  # cut inside the vocabulary
  not_gguf = tmp_path / "not.gguf"
  not_gguf.write_bytes(b"PK\x03\x04" + b"\0" * 64)
  bad_model = tmp_path / "bad.model"
  bad_model.write_bytes(mistral_model.read_bytes()[:5000])
  bad_folder = tmp_path / "folder"
  bad_folder.mkdir()
  (bad_folder / "tokenizer.json").write_text("{not json")
  for path, match in [(truncated, "truncated or corrupt"), (not_gguf, "magic"),
                      (bad_model, "not a valid sentencepiece model"),
                      (bad_folder, "could not be read")]:
    with pytest.raises(ValueError, match=match) as error:
      Tokenizer.load(path)
    assert str(path) in str(error.value)


def test_check_matches(smollm2_tokenizer, mistral):
  smol = smollm2_tokenizer
  smol.check_matches(49152, "smollm2.gguf")
  smol.check_matches(49280, "padded.safetensors")  # embedding tables padded past the vocab are fine
  mistral.check_matches(32000, "mistral.safetensors")
  with pytest.raises(ValueError,
                     match=r"config\.json: field `vocab_size` is 32000.*49152") as error:
    smol.check_matches(32000, "config.json")
  assert smol.name_or_path in str(error.value)
  with pytest.raises(ValueError, match="vocab_size"):
    mistral.check_matches(0, "config.json")
