"""The SFT entry point resumes where it stopped: same batches, past a corrupt checkpoint, and
without training again once finished (SmolLM2, one ALFWorld demonstration, orbax)."""

import json
import pathlib
import re

import numpy as np
import pytest

from experiments import memex_sft
from memex_jax.runs import log as run_log


def _write_segments(folder: pathlib.Path, lengths: list[int]) -> str:
  """A demonstrations folder whose segment i has `lengths[i]` tokens, all of them i * 100 + k."""
  with (folder / "segments-00000-of-00001.jsonl").open("w") as f:
    for i, n in enumerate(lengths):
      ids = [i * 100 + k for k in range(n)]
      f.write(json.dumps({"token_ids": ids, "loss_mask": [1] * n}) + "\n")
  return str(folder)


def test_an_epoch_packs_every_segment_once_and_resumed_steps_take_the_same_minibatches(
    tmp_path):
  # Nine segments, one longer than the 16-token rows: they need five rows, three minibatches.
  lengths = [5, 9, 12, 20, 7, 3, 14, 6, 11]
  epoch = memex_sft.demonstration_epoch(_write_segments(tmp_path, lengths), 0, rows=2, seq_len=16)
  assert (epoch.num_segments, epoch.num_minibatches, sum(epoch.truncated)) == (9, 3, 1)
  ids = epoch.batch.trajectory_ids
  assert sorted(np.unique(ids[ids >= 0]).tolist()) == list(range(9))  # each segment once
  straight = [epoch.minibatch(step) for step in range(8)]
  np.testing.assert_array_equal(straight[0][0].tokens, straight[3][0].tokens)  # epoch 2
  # A run resumed at step 4 (its progress read back from a checkpoint's host JSON).
  progress = memex_sft.Progress()
  for step in range(4):
    progress = progress.after(1.0, straight[step][1])
  host = json.loads(json.dumps(progress.to_host(epoch.num_segments)))
  resumed = memex_sft.Progress.from_host(host)
  assert (resumed.step, resumed.truncated) == (4, progress.truncated)
  for step in range(resumed.step, 8):
    np.testing.assert_array_equal(epoch.minibatch(step)[0].tokens, straight[step][0].tokens)


def _sft(entry_point, workdir: pathlib.Path, num_steps: int, *flags: str) -> str:
  run = entry_point(
      "memex_sft", f"--config.workdir={workdir}", f"--config.num_steps={num_steps}", *flags,
      "--config.games.num=2", "--config.games.workers=1", "--config.demos.num=1",
      "--config.batch.seq_len=64", "--config.model.remat=False", "--config.checkpoint.every=1",
      "--config.checkpoint.keep=3", "--config.optim.learning_rate=1e-4",
      "--config.optim.decay_steps=2")
  assert run.returncode == 0, run.stderr[-2000:]
  # orbax logs each save and restore at INFO through absl (111 lines for a one-step run before
  # the entry points quieted it), and jax its TPU backend probe.
  info = re.findall(r"^I\d{4} .*", run.stderr, re.MULTILINE)
  assert not info, info[:5]
  return run.stdout


def _truncate_largest_file(folder: pathlib.Path) -> None:
  victim = max((p for p in folder.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
  with victim.open("r+b") as f:
    f.truncate(victim.stat().st_size // 2)


def _host(step_dir: pathlib.Path) -> dict:
  return json.loads((step_dir / "host" / "metadata").read_text())


@pytest.mark.slow
def test_resumes_past_a_corrupt_checkpoint_and_not_once_finished(tmp_path, entry_point):
  workdir, checkpoints = tmp_path / "run", tmp_path / "run" / "checkpoints"
  _sft(entry_point, workdir, 2)
  # The demonstration's 2 segments take one step each: checkpoint 1 stands inside an epoch.
  _truncate_largest_file(checkpoints / "2" / "state")
  resumed = _sft(entry_point, workdir, 3)
  assert "checkpoint 2 rejected" in resumed and "resuming from checkpoint 1" in resumed
  # Step 2 again from checkpoint 1 packs what the first run packed: same counts.
  assert _host(checkpoints / "2") == _host(checkpoints / "rejected" / "2")
  finished = _sft(entry_point, workdir, 3)
  assert "resuming from checkpoint 3" in finished and "rejected" not in finished
  assert "already finished at step 3" in finished

  records = run_log.read_log(workdir / "metrics.jsonl", kind="sft")
  assert [r["step"] for r in records] == [1, 2, 2, 3]
  assert [r["segments_truncated"] for r in records] == [1, 2, 2, 3]
  # A cosine from 1e-4 to its floor of 1e-5 over 2 updates, continued by the resumed runs.
  np.testing.assert_allclose([r["learning_rate"] for r in records],
                             [1e-4, 5.5e-5, 5.5e-5, 1e-5], rtol=1e-5)
  assert sorted(int(p.name) for p in checkpoints.iterdir() if p.name.isdigit()) == [1, 2, 3]
  assert _host(checkpoints / "3")["sft_step"] == 3
  assert [p.name for p in (workdir / "params").iterdir() if p.name.isdigit()] == ["3"]

  # A new run going on from the step-3 export starts from it, at its own step 1.
  onward = _sft(entry_point, tmp_path / "onward", 1,
                f"--config.init_checkpoint={workdir / 'params'}")
  assert f"params from {workdir / 'params'} (step 3)" in onward
  assert "resuming" not in onward
  assert [r["step"] for r in run_log.read_log(tmp_path / "onward" / "metrics.jsonl",
                                              kind="sft")] == [1]


def test_progress_counts_heldout_measurements_since_the_best():
  progress = memex_sft.Progress()
  for loss in (2.0, 1.5, 1.7, 1.6, 1.4, 1.9):
    progress = progress.measured(loss)
  assert (progress.best_heldout, progress.stale) == (1.4, 1)
  resumed = memex_sft.Progress.from_host(json.loads(json.dumps(progress.to_host(5))))
  assert resumed == progress


@pytest.mark.slow
def test_a_heldout_set_without_trained_tokens_is_a_clear_error(tmp_path, entry_point):
  # 64-token rows hold only the system prompt: nothing of the held-out demonstration is trained.
  run = entry_point(
      "memex_sft", f"--config.workdir={tmp_path / 'run'}", "--config.num_steps=2",
      "--config.games.num=2", "--config.games.workers=1", "--config.demos.num=2",
      "--config.heldout.one_in=2", "--config.batch.seq_len=64", "--config.model.remat=False")
  assert run.returncode != 0
  assert "held-out demonstrations have no trained token within seq_len 64" in run.stderr
