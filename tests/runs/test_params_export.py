"""The params export that RL, evaluation and serving start from."""

import jax.numpy as jnp
import numpy as np
import pytest

from memex_jax.runs import params_export


def test_export_replaces_an_export_at_the_same_or_a_later_step(tmp_path):
  target = {"w": jnp.zeros(3)}
  directory = params_export.export_params(str(tmp_path), 5, {"w": jnp.ones(3)})
  # A rerun that ends earlier (fewer steps configured) must not leave step 5 to be imported.
  params_export.export_params(str(tmp_path), 3, {"w": jnp.full(3, 3.0)})
  np.testing.assert_array_equal(params_export.import_params(directory, target)["w"], 3.0)
  # The same step again with other params: the new ones are what gets imported.
  params_export.export_params(str(tmp_path), 3, {"w": jnp.full(3, 4.0)})
  np.testing.assert_array_equal(params_export.import_params(directory, target)["w"], 4.0)
  # A later export replaces the earlier one (one export is kept).
  params_export.export_params(str(tmp_path), 7, {"w": jnp.full(3, 7.0)})
  np.testing.assert_array_equal(params_export.import_params(directory, target)["w"], 7.0)
  assert sorted(p.name for p in (tmp_path / "params").iterdir() if p.name.isdigit()) == ["7"]


def test_a_folder_without_an_export_names_what_to_pass(tmp_path):
  with pytest.raises(FileNotFoundError, match="no restorable params export under .*memex_sft"):
    params_export.import_params(str(tmp_path), {"w": jnp.zeros(3)})
