"""Entry-point configs load in every variant; bad configs end a run with one clear line."""

import functools

import pytest

from experiments.configs import evaluate, memex_grpo, memex_sft


@pytest.mark.parametrize("module", [memex_grpo, memex_sft, evaluate])
@pytest.mark.parametrize("variant", ["", "gpu"])
def test_variants_load(module, variant):
  config = module.get_config(variant)
  assert config.workdir.startswith("/tmp/")
  assert config.model.dtype in ("float32", "bfloat16")


def test_gpu_variant_is_the_paper_setting():
  c = memex_grpo.get_config("gpu")
  assert (c.rollout.prompts_per_iteration, c.rollout.group_size) == (32, 8)
  assert c.model.int4 and c.agent.context_window == 8192 and c.agent.threshold == 2048
  assert (c.loss.clip_low, c.loss.clip_high, c.loss.tis_cap,
          c.loss.kl_coef) == (0.2, 0.28, 2.0, 0.001)


def test_unknown_variant_is_refused():
  with pytest.raises(ValueError, match="unknown memex_grpo config variant"):
    memex_grpo.get_config("tpu-huge")


def test_unknown_key_and_impossible_mesh_fail_with_one_line(tmp_path, entry_point):
  _run = functools.partial(entry_point, "memex_grpo", devices=8)  # rows=3 would split over 1

  unknown = _run(f"--config.workdir={tmp_path}", "--config.optim.learnig_rate=1")
  assert unknown.returncode != 0 and "learnig_rate" in unknown.stderr
  mesh = _run(f"--config.workdir={tmp_path}", "--config.mesh.data=3", "--config.mesh.fsdp=1")
  assert mesh.returncode != 0
  last = mesh.stderr.strip().splitlines()[-1]
  assert last.startswith("config error: mesh data=3") and "devices" in last
  rows = _run(f"--config.workdir={tmp_path}", "--config.batch.rows=3")  # 8 fake devices
  assert rows.returncode != 0
  assert rows.stderr.strip().splitlines()[-1].startswith("config error: config.batch.rows 3")
