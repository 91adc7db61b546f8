r"""SFT warm start: next-token loss on the assistant tokens of Memex-format expert demonstrations.

  python -m experiments.memex_sft --config experiments/configs/memex_sft.py \
      --config.workdir=/tmp/memex_sft

Generates the tasks (`config.env.name`: ALFWorld games or AppWorld tasks) and demonstrations
when missing, packs every demonstration segment of an epoch into [rows, seq_len] minibatches (truncations counted), steps through them in order,
epoch after epoch, until `num_steps` or the smoothed loss reaches `target_loss`, and exports
params that memex_grpo can start from. Checkpoints every `checkpoint.every` steps and at the end;
a killed run resumes from its last complete checkpoint with the minibatches it would have taken
(step s trains on minibatch s mod k of the epoch's k).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any

from absl import app
from absl import flags
import jax
import numpy as np
from ml_collections import config_flags
import tqdm

from memex_jax import demos
from memex_jax import rl
from memex_jax import runs
from memex_jax.agent.presets import smollm2_alfworld, smollm2_appworld
from memex_jax.demos import appworld as appworld_demos
from memex_jax.demos import dataset as demo_dataset
from memex_jax.demos import search_prior
from memex_jax.envs import families
from memex_jax.models.policy import load_policy

_CONFIG = config_flags.DEFINE_config_file("config", None, "experiments/configs/memex_sft.py")


@dataclasses.dataclass(frozen=True)
class Progress:
  """Where an SFT run stands; the host half of its checkpoints.

  Attributes:
    step: steps taken (the next one trains on minibatch step mod k).
    smoothed_loss: moving average (0.9) of the step losses; None before the first step.
    truncated: segments cut to seq_len so far.
  """

  step: int = 0
  smoothed_loss: float | None = None
  truncated: int = 0

  def after(self, loss: float, truncated: int) -> "Progress":
    """The progress one step later, that step having had `loss` and cut `truncated` segments."""
    smoothed = loss if self.smoothed_loss is None else 0.9 * self.smoothed_loss + 0.1 * loss
    return Progress(self.step + 1, smoothed, self.truncated + truncated)

  def to_host(self, num_segments: int) -> dict[str, Any]:
    return {"sft_step": self.step, "sft_loss": self.smoothed_loss,
            "segments_truncated": self.truncated, "num_segments": num_segments}

  @classmethod
  def from_host(cls, host: dict[str, Any]) -> "Progress":
    return cls(int(host["sft_step"]), host["sft_loss"], int(host["segments_truncated"]))


@dataclasses.dataclass(frozen=True)
class Epoch:
  """Every demonstration segment packed once, as k minibatches of [rows, seq_len].

  Attributes:
    batch: [k * rows, seq_len] host batch.
    rows: rows of one minibatch.
    truncated: [k] segments of each minibatch cut to seq_len.
    num_segments: segments in the epoch.
  """

  batch: rl.PackedBatch
  rows: int
  truncated: tuple[int, ...]
  num_segments: int

  @property
  def num_minibatches(self) -> int:
    return len(self.truncated)

  def minibatch(self, step: int) -> tuple[rl.PackedBatch, int]:
    """(minibatch, its truncated segments) that step `step` (0-based) trains on."""
    i = step % self.num_minibatches
    return rl.take_rows(self.batch, slice(i * self.rows, (i + 1) * self.rows)), self.truncated[i]


def demonstration_epoch(folder: str, seed: int, rows: int, seq_len: int) -> Epoch:
  """The demonstrations of `folder`, in a seeded shuffled order, packed into one epoch."""
  samples = rl.supervised_samples(demo_dataset.iter_sft_examples(folder))
  np.random.default_rng(seed).shuffle(samples)
  batch, _ = rl.pack_samples(samples, None, rows, seq_len)
  too_long = {s.trajectory_id for s in samples if len(s.token_ids) > seq_len}
  truncated = [len(too_long & set(np.unique(batch.trajectory_ids[i:i + rows]).tolist()))
               for i in range(0, batch.shape[0], rows)]
  return Epoch(batch, rows, tuple(truncated), len(samples))


def alfworld_demonstrations(c: Any, games: list[str]) -> demos.DemonstrationConfig:
  agent = runs.from_section(smollm2_alfworld, c.demos.agent, "config.demos.agent")
  # The expert searches in the order of a prior estimated from these (training) games only.
  return demos.DemonstrationConfig(agent=agent, prior=search_prior.estimate(games))


def appworld_demonstrations(c: Any, tasks: list[str]) -> appworld_demos.DemonstrationConfig:
  del tasks  # the expert replays each task's reference solution
  agent = runs.from_section(smollm2_appworld, c.demos.agent, "config.demos.agent")
  return appworld_demos.DemonstrationConfig(agent=agent)


# family -> its expert's settings: the SmolLM2 preset of the family with `config.demos.agent`.
DEMONSTRATIONS = {"alfworld": alfworld_demonstrations, "appworld": appworld_demonstrations}


def demonstrations_dir(c: Any) -> str:
  """The demonstrations folder, written first when it has no summary."""
  demo_dir = c.demos.dir or os.path.join(c.workdir, "demonstrations")
  if os.path.exists(os.path.join(demo_dir, demo_dataset.SUMMARY)):
    return demo_dir
  family, _ = runs.from_section(families.select, c.env, "config.env")
  games = runs.from_section(family.tasks, c.games, "config.games")
  summary = demo_dataset.write_demonstrations(
      games, demo_dir, c.demos.num, c.seed, workers=c.games.workers,
      config=DEMONSTRATIONS[family.name](c, games), family=family.name)
  print(f"demonstrations: {summary['demonstrations']} written, {summary['failed']} failed; "
        f"{summary['share_crossing_threshold']:.0%} cross the threshold, "
        f"{summary['share_with_used_read']:.0%} use a ReadExperience")
  return demo_dir


def resume(ckpt: runs.Checkpointer, state: rl.TrainState,
           num_segments: int) -> tuple[rl.TrainState, Progress]:
  """The newest usable checkpoint's (state, progress), or (`state`, a fresh start)."""
  restored = runs.restore_latest(ckpt, state)
  if restored is None:
    return state, Progress()
  if restored.host["num_segments"] != num_segments:
    raise SystemExit(f"checkpoint {restored.step} in {ckpt.directory} trained on "
                     f"{restored.host['num_segments']} demonstration segments, the demonstrations "
                     f"now have {num_segments}; resume with the same demonstrations")
  print(f"resuming from checkpoint {restored.step}")
  return restored.state, Progress.from_host(restored.host)


def reached_target(progress: Progress, c: Any) -> bool:
  return progress.smoothed_loss is not None and progress.smoothed_loss < c.target_loss


def finished(progress: Progress, c: Any) -> bool:
  return progress.step >= c.num_steps or reached_target(progress, c)


def log_step(log: runs.RunLog, progress: Progress, metrics: Any, fill: float) -> None:
  log.write(progress.step, {**jax.device_get(metrics), "smoothed_loss": progress.smoothed_loss,
                            "segments_truncated": progress.truncated, "fill": fill}, kind="sft")
  tqdm.tqdm.write(f"step {progress.step}: loss {float(metrics['loss']):.4f} "
                  f"(smoothed {progress.smoothed_loss:.4f})")


def train(c: Any, training: runs.ShardedTraining, state: rl.TrainState, progress: Progress,
          epoch: Epoch, ckpt: runs.Checkpointer,
          log: runs.RunLog) -> tuple[rl.TrainState, Progress]:
  """Steps from `progress` until `finished`, checkpointing every `checkpoint.every` and last."""
  for _ in tqdm.trange(progress.step, c.num_steps, desc="memex_sft", initial=progress.step,
                       total=c.num_steps):
    minibatch, truncated = epoch.minibatch(progress.step)
    state, metrics = training.step_fn(state, minibatch)
    progress = progress.after(float(metrics["loss"]), truncated)
    done = finished(progress, c)
    if progress.step % c.log_every == 0 or done:
      log_step(log, progress, metrics, float(np.mean(minibatch.segment_ids > 0)))
    if progress.step % c.checkpoint.every == 0 or done:
      ckpt.save(progress.step, state, progress.to_host(epoch.num_segments))
    if done:
      break
  return state, progress


@runs.exits_on_config_error
def main(argv) -> None:
  del argv
  c = _CONFIG.value
  mesh = runs.start_run(c.mesh, c.batch.rows)
  epoch = demonstration_epoch(demonstrations_dir(c), c.seed, c.batch.rows, c.batch.seq_len)
  print(f"an epoch: {epoch.num_segments} demonstration segments in {epoch.num_minibatches} "
        f"minibatches of {c.batch.rows} x {c.batch.seq_len}")
  model_cfg, params, _ = runs.from_section(load_policy, c.model, "config.model")
  optimizer = runs.from_section(rl.make_optimizer, c.optim, "config.optim")
  training = runs.sharded_training(model_cfg, params, optimizer,
                                   functools.partial(rl.sft_step, model_cfg, optimizer), mesh,
                                   c.seed, c.batch.rows, c.batch.seq_len)
  log = runs.RunLog(c.workdir)
  ckpt = runs.Checkpointer(os.path.join(c.workdir, "checkpoints"), c.checkpoint.keep)
  try:
    state, progress = resume(ckpt, training.state, epoch.num_segments)
    if finished(progress, c):
      print(f"already finished at step {progress.step}; exporting its params")
    else:
      state, progress = train(c, training, state, progress, epoch, ckpt, log)
  finally:
    ckpt.close()
    log.close()
  if reached_target(progress, c):
    print(f"target loss {c.target_loss} reached at step {progress.step}")
  exported = runs.export_params(c.workdir, progress.step, state.params)
  print(f"SFT params at {exported} (step {progress.step}, smoothed loss "
        f"{progress.smoothed_loss:.4f}); metrics {log.path}")


if __name__ == "__main__":
  jax.config.config_with_absl()
  flags.mark_flag_as_required("config")
  app.run(main)
