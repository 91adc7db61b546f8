"""The side-by-side bench's rows: ratios against torch, and each path against its own ceiling."""

import argparse

import pytest

from bench import cpu_vs_torch
from memex_jax.models import config

CEILINGS = {"bandwidth": 20e9, "float_bytes": 540e6, "int4_bytes": 250e6, "bf16_bytes": 270e6,
            "peak_flops": 150e9}
ARGS = argparse.Namespace(new_tokens=64)


def test_decode_row_rates_each_path_against_torch_and_its_weight_bytes():
  seconds = {"jax": 2.0, "jax_int4": 1.6, "jax_mm": 1.0, "torch": 3.0}
  rec = cpu_vs_torch.row_record("decode_b8", seconds, ARGS, config.smollm2_135m(), CEILINGS)
  assert rec["jax_tok_s"] == 8 * 64 / 2.0
  assert rec["ratio"] == pytest.approx(1.5) and rec["mm_ratio"] == pytest.approx(3.0)
  assert rec["int4_over_float"] == pytest.approx(1.25)
  # the bfloat16 path moves half the float bytes per step, so its bound is twice as high
  bound = lambda weight_bytes: 8 * CEILINGS["bandwidth"] / weight_bytes
  assert rec["jax_mm_roofline_frac"] == pytest.approx(rec["jax_mm_tok_s"] / bound(270e6))
  assert rec["jax_roofline_frac"] == pytest.approx(rec["jax_tok_s"] / bound(540e6))


def test_train_row_ratio_is_torch_seconds_over_jax_seconds():
  rec = cpu_vs_torch.row_record("train_b4x512", {"jax": 10.0, "jax_mm": 5.0, "torch": 7.5}, ARGS,
                                config.smollm2_135m(), CEILINGS)
  assert rec["ratio"] == pytest.approx(0.75) and rec["mm_ratio"] == pytest.approx(1.5)
  assert rec["jax_mm_peak_frac"] == pytest.approx(2 * rec["jax_peak_frac"])


def test_rows_without_the_bfloat16_path_carry_no_mm_ratio():
  rec = cpu_vs_torch.row_record("prefill_512", {"jax": 1.0, "torch": 0.5}, ARGS,
                                config.smollm2_135m(), CEILINGS)
  assert rec["ratio"] == pytest.approx(0.5) and "mm_ratio" not in rec


def test_a_negative_shift_passage_count_is_a_usage_error_before_any_work(monkeypatch, capsys):
  monkeypatch.setattr("sys.argv", ["cpu_vs_torch", "--shift_passages", "-1"])
  with pytest.raises(SystemExit) as exit_:
    cpu_vs_torch.main()
  assert exit_.value.code == 2
  assert "--shift_passages must be >= 0, got -1" in capsys.readouterr().err
