r"""SFT warm start: next-token loss on the assistant tokens of Memex-format expert demonstrations.

  python -m experiments.memex_sft --config experiments/configs/memex_sft.py \
      --config.workdir=/tmp/memex_sft

Generates the tasks (`config.env.name`: ALFWorld games or AppWorld tasks) and demonstrations
when missing, holds out one demonstration in `heldout.one_in`, packs every other demonstration
segment of an epoch into [rows, seq_len] minibatches (truncations counted), and steps through
them in order, epoch after epoch. Every `heldout.every` steps it measures the held-out loss and
exports the params when it improves; it stops at `num_steps`, after `heldout.patience`
measurements without improvement, when the smoothed loss reaches `target_loss`, or after
`max_minutes`. What memex_grpo starts from is the export with the best held-out loss (the last
params when nothing is held out). Checkpoints every `checkpoint.every` steps and at the end; a
killed run resumes from its last complete checkpoint with the minibatches it would have taken
(step s trains on minibatch s mod k of the epoch's k).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from typing import Any

from absl import app
from absl import flags
import jax
import numpy as np
import optax
from ml_collections import config_flags
import tqdm

from memex_jax import demos
from memex_jax import parallel
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
    best_heldout: the lowest held-out loss measured (its params are the export); None before.
    stale: held-out measurements since the best one.
  """

  step: int = 0
  smoothed_loss: float | None = None
  truncated: int = 0
  best_heldout: float | None = None
  stale: int = 0

  def after(self, loss: float, truncated: int) -> "Progress":
    """The progress one step later, that step having had `loss` and cut `truncated` segments."""
    smoothed = loss if self.smoothed_loss is None else 0.9 * self.smoothed_loss + 0.1 * loss
    return dataclasses.replace(self, step=self.step + 1, smoothed_loss=smoothed,
                               truncated=self.truncated + truncated)

  def measured(self, heldout: float) -> "Progress":
    """The progress after a held-out measurement of `heldout`."""
    if self.best_heldout is None or heldout < self.best_heldout:
      return dataclasses.replace(self, best_heldout=heldout, stale=0)
    return dataclasses.replace(self, stale=self.stale + 1)

  def to_host(self, num_segments: int) -> dict[str, Any]:
    return {"sft_step": self.step, "sft_loss": self.smoothed_loss,
            "segments_truncated": self.truncated, "num_segments": num_segments,
            "best_heldout": self.best_heldout, "stale": self.stale}

  @classmethod
  def from_host(cls, host: dict[str, Any]) -> "Progress":
    return cls(int(host["sft_step"]), host["sft_loss"], int(host["segments_truncated"]),
               host.get("best_heldout"), int(host.get("stale", 0)))


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


def demonstration_epoch(folder: str, seed: int, rows: int, seq_len: int,
                        keep_demo: Any = None, compress_weight: int = 1) -> Epoch:
  """The demonstrations of `folder` (those `keep_demo` accepts, when given), in a seeded
  shuffled order, packed into one epoch; CompressExperience turns weigh `compress_weight`."""
  samples = rl.supervised_samples(
      demo_dataset.iter_sft_examples(folder, keep_demo, compress_weight))
  if not samples:
    raise SystemExit(f"no demonstration segments to pack in {folder}")
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


def stopped_improving(progress: Progress, c: Any) -> bool:
  return c.heldout.patience > 0 and progress.stale >= c.heldout.patience


def finished(progress: Progress, c: Any) -> bool:
  return (progress.step >= c.num_steps or reached_target(progress, c)
          or stopped_improving(progress, c))


def log_step(log: runs.RunLog, progress: Progress, metrics: Any, fill: float,
             learning_rate: float) -> None:
  log.write(progress.step, {**jax.device_get(metrics), "smoothed_loss": progress.smoothed_loss,
                            "segments_truncated": progress.truncated, "fill": fill,
                            "learning_rate": learning_rate}, kind="sft")
  tqdm.tqdm.write(f"step {progress.step}: loss {float(metrics['loss']):.4f} "
                  f"(smoothed {progress.smoothed_loss:.4f})")


def heldout_measure(model_cfg: Any, training: runs.ShardedTraining, mesh: Any,
                    heldout: Epoch) -> Any:
  """params -> the token-weighted loss of the held-out demonstrations."""
  nll = parallel.sharded_jit(functools.partial(rl.sft_nll_sum, model_cfg), mesh,
                             (training.params_shardings, training.batch_shardings), None)

  def measure(params: Any) -> float:
    total = count = 0.0
    for i in range(heldout.num_minibatches):
      summed, tokens = nll(params, training.put(heldout.minibatch(i)[0]))
      total, count = total + float(summed), count + float(tokens)
    return total / max(count, 1.0)
  return measure


def measure_heldout(c: Any, state: rl.TrainState, progress: Progress, measure: Any,
                    log: runs.RunLog) -> Progress:
  """`progress` after a held-out measurement; the params are exported when it is the best."""
  loss = measure(state.params)
  progress = progress.measured(loss)
  if progress.stale == 0:
    runs.export_params(c.workdir, progress.step, state.params)
  log.write(progress.step, {"heldout_loss": loss, "best_heldout": progress.best_heldout},
            kind="sft_heldout")
  tqdm.tqdm.write(f"step {progress.step}: held-out loss {loss:.4f} (best "
                  f"{progress.best_heldout:.4f}{', exported' if progress.stale == 0 else ''})")
  return progress


def train(c: Any, training: runs.ShardedTraining, state: rl.TrainState, progress: Progress,
          epoch: Epoch, measure: Any, ckpt: runs.Checkpointer, log: runs.RunLog,
          rate: optax.ScalarOrSchedule) -> tuple[rl.TrainState, Progress]:
  """Steps from `progress` until `finished` or `max_minutes` (of this invocation), measuring the
  held-out loss every `heldout.every` steps (`measure` None: no held-out set), checkpointing
  every `checkpoint.every` and last; `rate` is the optimizer's learning rate, logged per step."""
  deadline = time.monotonic() + 60 * c.max_minutes if c.max_minutes > 0 else float("inf")
  for _ in tqdm.trange(progress.step, c.num_steps, desc="memex_sft", initial=progress.step,
                       total=c.num_steps):
    minibatch, truncated = epoch.minibatch(progress.step)
    state, metrics = training.step_fn(state, minibatch)
    progress = progress.after(float(metrics["loss"]), truncated)
    out_of_time = time.monotonic() > deadline
    if measure and (progress.step % c.heldout.every == 0 or out_of_time
                    or progress.step == c.num_steps):
      progress = measure_heldout(c, state, progress, measure, log)
    done = finished(progress, c) or out_of_time
    if progress.step % c.log_every == 0 or done:
      # The rate this step's update used (its count was progress.step - 1).
      log_step(log, progress, metrics, float(np.mean(minibatch.segment_ids > 0)),
               float(rate(progress.step - 1) if callable(rate) else rate))
    if progress.step % c.checkpoint.every == 0 or done:
      ckpt.save(progress.step, state, progress.to_host(epoch.num_segments))
    if done:
      if out_of_time:
        print(f"stopping at step {progress.step}: max_minutes ({c.max_minutes}) is spent")
      break
  return state, progress


def heldout_split(c: Any) -> tuple[Any, Any]:
  """(keep for training, keep for held-out) predicates on a demonstration's number."""
  n = c.heldout.one_in
  if n < 0 or n == 1:
    raise runs.ConfigError(f"config.heldout.one_in must be 0 (none) or >= 2, got {n}")
  if n == 0:
    return None, None
  return (lambda demo: demo % n != 0), (lambda demo: demo % n == 0)


@runs.exits_on_config_error
def main(argv) -> None:
  del argv
  c = _CONFIG.value
  mesh = runs.start_run(c.mesh, c.batch.rows)
  if c.compress_weight < 1:
    raise runs.ConfigError(f"config.compress_weight={c.compress_weight} must be >= 1")
  folder = demonstrations_dir(c)
  train_demo, heldout_demo = heldout_split(c)
  epoch = demonstration_epoch(folder, c.seed, c.batch.rows, c.batch.seq_len, train_demo,
                              c.compress_weight)
  heldout = (demonstration_epoch(folder, c.seed, c.batch.rows, c.batch.seq_len, heldout_demo)
             if heldout_demo else None)
  if heldout and not np.any(heldout.batch.loss_mask):
    raise SystemExit(f"the held-out demonstrations have no trained token within seq_len "
                     f"{c.batch.seq_len}: raise config.batch.seq_len or set "
                     f"config.heldout.one_in=0")
  print(f"an epoch: {epoch.num_segments} demonstration segments in {epoch.num_minibatches} "
        f"minibatches of {c.batch.rows} x {c.batch.seq_len}"
        + (f"; {heldout.num_segments} held-out segments" if heldout else ""))
  model_cfg, params, _ = runs.from_section(load_policy, c.model, "config.model")
  # One schedule for the optimizer and the log (make_optimizer takes a schedule as it is).
  o = c.optim
  rate = rl.learning_rate_schedule(o.learning_rate, o.warmup_steps, o.decay_steps,
                                   o.final_fraction)
  optimizer = runs.from_section(rl.make_optimizer, o, "config.optim", learning_rate=rate)
  training = runs.sharded_training(model_cfg, params, optimizer,
                                   functools.partial(rl.sft_step, model_cfg, optimizer), mesh,
                                   c.seed, c.batch.rows, c.batch.seq_len,
                                   init_checkpoint=c.init_checkpoint)
  measure = heldout_measure(model_cfg, training, mesh, heldout) if heldout else None
  log = runs.RunLog(c.workdir)
  ckpt = runs.Checkpointer(os.path.join(c.workdir, "checkpoints"), c.checkpoint.keep)
  try:
    state, progress = resume(ckpt, training.state, epoch.num_segments)
    if finished(progress, c):
      print(f"already finished at step {progress.step}")
    else:
      state, progress = train(c, training, state, progress, epoch, measure, ckpt, log, rate)
  finally:
    ckpt.close()
    log.close()
  if reached_target(progress, c):
    print(f"target loss {c.target_loss} reached at step {progress.step}")
  if stopped_improving(progress, c):
    print(f"held-out loss stopped improving ({c.heldout.patience} measurements without a new "
          f"best)")
  if measure is None:
    runs.export_params(c.workdir, progress.step, state.params)
  exported = os.path.join(c.workdir, runs.EXPORT_DIR)
  best = f", best held-out loss {progress.best_heldout:.4f}" if measure else ""
  print(f"SFT params at {exported} (step {progress.step}, smoothed loss "
        f"{progress.smoothed_loss:.4f}{best}); metrics {log.path}")


if __name__ == "__main__":
  jax.config.config_with_absl()
  flags.mark_flag_as_required("config")
  app.run(main)
