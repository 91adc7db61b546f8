"""BertEncoder and its HF loader against transformers' torch BertModel."""

import json

import jax
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file
import torch
import transformers

from memex_jax.models import bert
from memex_jax.models.pretrained import minilm_dir

PAIRS = [
    ("Who wrote the novel Dune?", "Frank Herbert wrote Dune, published in 1965."),
    ("Put the mug in the microwave.", "The microwave is on the kitchen counter, next to the sink."),
    ("ok", "fine"),
    ("How many legs does a spider have, and why do people confuse them with insects?", "Eight."),
]


def torch_hidden(model: torch.nn.Module, batch: dict[str, np.ndarray]) -> np.ndarray:
  with torch.no_grad():
    return model(**{k: torch.from_numpy(v) for k, v in batch.items()}).last_hidden_state.numpy()


def jax_hidden(cfg: bert.BertConfig, params, batch: dict[str, np.ndarray]) -> np.ndarray:
  return np.asarray(jax.jit(bert.BertEncoder(cfg).apply)(
      {"params": params}, batch["input_ids"].astype(np.int32), batch["attention_mask"],
      batch["token_type_ids"].astype(np.int32)))


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
  """A random-init 2-layer BERT (tanh GELU) saved by transformers."""
  path = tmp_path_factory.mktemp("tiny_bert")
  hf_cfg = transformers.BertConfig(
      vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
      intermediate_size=32, max_position_embeddings=40, hidden_act="gelu_new")
  torch.manual_seed(0)
  transformers.BertModel(hf_cfg).eval().save_pretrained(path)
  return path


@pytest.fixture(scope="module")
def tiny_batch():
  rng = np.random.default_rng(0)
  lengths = np.array([12, 5, 9])
  mask = (np.arange(12)[None] < lengths[:, None]).astype(np.int64)
  return {"input_ids": rng.integers(1, 64, (3, 12)) * mask, "attention_mask": mask,
          "token_type_ids": (np.arange(12)[None] >= lengths[:, None] // 2) * mask}


def test_minilm_matches_transformers_on_sentence_pairs():
  cfg, params = bert.load_bert(minilm_dir())
  assert (cfg.num_layers, cfg.hidden_size, cfg.num_heads) == (6, 384, 12)
  tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm_dir()))
  batch = dict(tokenizer([a for a, _ in PAIRS], [b for _, b in PAIRS], padding=True,
                         return_tensors="np"))
  assert batch["token_type_ids"].any() and not batch["attention_mask"].all()
  reference = torch_hidden(transformers.AutoModel.from_pretrained(str(minilm_dir())).eval(), batch)
  real = batch["attention_mask"].astype(bool)
  np.testing.assert_allclose(jax_hidden(cfg, params, batch)[real], reference[real], atol=1e-4)


def test_loaded_tree_matches_module_init(tiny_dir):
  cfg, params = bert.load_bert(tiny_dir)
  shapes = jax.eval_shape(lambda: bert.BertEncoder(cfg).init(
      jax.random.key(0), np.zeros((1, 4), np.int32), np.ones((1, 4), bool)))["params"]
  assert jax.tree.structure(shapes) == jax.tree.structure(params)
  assert all(jax.tree.leaves(jax.tree.map(lambda s, p: s.shape == p.shape, shapes, params)))


def test_tiny_matches_transformers_from_safetensors_and_torch_pickle(tiny_dir, tiny_batch,
                                                                     tmp_path):
  cfg, params = bert.load_bert(tiny_dir)
  assert cfg.hidden_act == "gelu_new"
  model = transformers.BertModel.from_pretrained(str(tiny_dir)).eval()
  reference = torch_hidden(model, tiny_batch)
  real = tiny_batch["attention_mask"].astype(bool)
  np.testing.assert_allclose(jax_hidden(cfg, params, tiny_batch)[real], reference[real], atol=1e-5)

  # A folder with only the legacy torch pickle loads to the same parameters.
  (tmp_path / bert.CONFIG_FILE).write_text((tiny_dir / bert.CONFIG_FILE).read_text())
  torch.save(model.state_dict(), tmp_path / bert.TORCH_FILE)
  _, pickled = bert.load_bert(tmp_path)
  jax.tree.map(np.testing.assert_array_equal, pickled, params)


def test_batch_padding_does_not_change_real_tokens(tiny_dir, tiny_batch):
  cfg, params = bert.load_bert(tiny_dir)
  padded = {k: np.pad(v, ((0, 1), (0, 4))) for k, v in tiny_batch.items()}  # + a padding row
  full, alone = jax_hidden(cfg, params, padded), jax_hidden(cfg, params, tiny_batch)
  assert np.isfinite(full).all()
  real = tiny_batch["attention_mask"].astype(bool)
  np.testing.assert_allclose(full[:3, :12][real], alone[real], atol=1e-6)


def test_missing_folder_and_weights_are_named(tmp_path):
  with pytest.raises(FileNotFoundError, match="nowhere"):
    bert.load_bert(tmp_path / "nowhere")
  with pytest.raises(FileNotFoundError, match="config.json"):
    bert.load_bert(tmp_path)
  (tmp_path / bert.CONFIG_FILE).write_text(json.dumps(
      {"vocab_size": 8, "hidden_size": 4, "num_hidden_layers": 1, "num_attention_heads": 2,
       "intermediate_size": 8}))
  with pytest.raises(FileNotFoundError, match="model.safetensors"):
    bert.load_bert(tmp_path)


def test_mismatched_config_and_tensors_are_named(tiny_dir, tmp_path):
  hf_cfg = json.loads((tiny_dir / bert.CONFIG_FILE).read_text())
  tensors = load_file(str(tiny_dir / bert.SAFETENSORS_FILE))

  def write(config: dict, weights: dict) -> None:
    (tmp_path / bert.CONFIG_FILE).write_text(json.dumps(config))
    save_file(weights, str(tmp_path / bert.SAFETENSORS_FILE))

  write(hf_cfg, tensors)
  (tmp_path / bert.CONFIG_FILE).write_text("{")
  with pytest.raises(ValueError, match=r"config\.json: not valid JSON"):
    bert.load_bert(tmp_path)
  write({k: v for k, v in hf_cfg.items() if k != "num_attention_heads"}, tensors)
  with pytest.raises(ValueError, match=r"config\.json.*num_attention_heads"):
    bert.load_bert(tmp_path)
  write({**hf_cfg, "num_attention_heads": 5}, tensors)
  with pytest.raises(ValueError, match=r"config\.json.*num_heads=5"):
    bert.load_bert(tmp_path)
  write({**hf_cfg, "model_type": "roberta"}, tensors)
  with pytest.raises(ValueError, match=r"config\.json.*model_type='roberta'"):
    bert.load_bert(tmp_path)

  key = "encoder.layer.1.attention.self.key.weight"
  write(hf_cfg, {k: v for k, v in tensors.items() if k != key})
  with pytest.raises(ValueError, match=rf"model\.safetensors.*missing tensor '{key}'"):
    bert.load_bert(tmp_path)
  write({**hf_cfg, "intermediate_size": 48}, tensors)
  with pytest.raises(ValueError, match=r"model\.safetensors.*'encoder\.layer\.0\.intermediate"
                                       r"\.dense\.weight' has shape \(32, 16\).*\(48, 16\)"):
    bert.load_bert(tmp_path)
