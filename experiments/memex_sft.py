r"""SFT warm start: next-token loss on the assistant tokens of Memex-format expert demonstrations.

  python -m experiments.memex_sft --config experiments/configs/memex_sft.py \
      --config.workdir=/tmp/memex_sft

Generates ALFWorld games and demonstrations when missing, packs demonstration segments into
fixed [rows, seq_len] batches (truncations counted), trains until `num_steps` or the smoothed
loss reaches `target_loss`, and exports params that memex_grpo can start from. Checkpoints every
`checkpoint.every` steps and at the end; a killed run resumes from its last complete checkpoint
with the same batches it would have packed (the packing queue is in the checkpoint).
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

from experiments import common
from memex_jax import checkpoint as checkpoint_lib
from memex_jax import parallel
from memex_jax import rl
from memex_jax import run_log
from memex_jax.agent.trajectory import Segment
from memex_jax.envs.alfworld import demonstration_dataset
from memex_jax.envs.alfworld import demonstrations

_CONFIG = config_flags.DEFINE_config_file("config", None, "experiments/configs/memex_sft.py")


@dataclasses.dataclass(frozen=True)
class Progress:
  """Where an SFT run stands; the host half of its checkpoints.

  Attributes:
    step: steps taken.
    smoothed_loss: moving average (0.9) of the step losses; None before the first step.
    truncated: segments cut to seq_len so far.
    queue: trajectory ids of this epoch's segments not packed yet, in packing order; empty
      starts the next epoch.
  """

  step: int = 0
  smoothed_loss: float | None = None
  truncated: int = 0
  queue: tuple[int, ...] = ()

  def after(self, loss: float, truncated: int, queue: tuple[int, ...]) -> "Progress":
    """The progress one step later, that step having had `loss` and cut `truncated` segments."""
    smoothed = loss if self.smoothed_loss is None else 0.9 * self.smoothed_loss + 0.1 * loss
    return Progress(self.step + 1, smoothed, self.truncated + truncated, queue)

  def to_host(self, num_segments: int) -> dict[str, Any]:
    return {"sft_step": self.step, "sft_loss": self.smoothed_loss,
            "segments_truncated": self.truncated, "queue": list(self.queue),
            "num_segments": num_segments}

  @classmethod
  def from_host(cls, host: dict[str, Any]) -> "Progress":
    return cls(int(host["sft_step"]), host["sft_loss"], int(host["segments_truncated"]),
               tuple(host["queue"]))


def demonstration_segments(folder: str, seed: int) -> dict[int, Segment]:
  """Every demonstration segment as a training Segment (no rollout logprobs, no reward), keyed
  by trajectory id, in the seeded shuffled order each epoch packs them in."""
  segments = [Segment(token_ids=ids, loss_mask=mask,
                      rollout_logprobs=np.zeros(len(ids), np.float32), trajectory_id=i,
                      group_id=0, segment_index=0, messages=(), reward=0.0, metrics=None)
              for i, (ids, mask) in enumerate(demonstration_dataset.iter_sft_examples(folder))]
  np.random.default_rng(seed).shuffle(segments)
  return {s.trajectory_id: s for s in segments}


def demonstrations_dir(c: Any) -> str:
  """The demonstrations folder, written first when it has no summary."""
  demo_dir = c.demos.dir or os.path.join(c.workdir, "demonstrations")
  if os.path.exists(os.path.join(demo_dir, demonstration_dataset.SUMMARY)):
    return demo_dir
  config = demonstrations.DemonstrationConfig(agent=demonstrations.smollm2_agent_config(
      context_window=c.demos.context_window, threshold=c.demos.threshold))
  summary = demonstration_dataset.write_demonstrations(common.alfworld_games(c.env), demo_dir,
                                                       c.demos.num, c.seed,
                                                       workers=c.env.workers, config=config)
  print(f"demonstrations: {summary['demonstrations']} written, {summary['failed']} failed; "
        f"{summary['share_crossing_threshold']:.0%} cross the threshold, "
        f"{summary['share_with_used_read']:.0%} use a ReadExperience")
  return demo_dir


def next_batch(segments: dict[int, Segment], queue: tuple[int, ...], rows: int,
               seq_len: int) -> tuple[rl.PackedBatch, rl.PackStats, tuple[int, ...]]:
  """(batch, stats, queue left) of the next step, first-fit from `queue` (empty: a new epoch)."""
  batch, pack = rl.pack_segments([segments[i] for i in queue or segments], None, rows, seq_len)
  return batch, pack, tuple(s.trajectory_id for s in pack.leftovers)


def resume(ckpt: checkpoint_lib.Checkpointer, state: rl.TrainState,
           num_segments: int) -> tuple[rl.TrainState, Progress]:
  """The newest usable checkpoint's (state, progress), or (`state`, a fresh start)."""
  restored = common.restore_latest(ckpt, state)
  if restored is None:
    return state, Progress()
  if "queue" not in restored.host:
    raise SystemExit(f"checkpoint {restored.step} in {ckpt.directory} has no packing queue (it "
                     "was written before SFT runs could resume); start in a new workdir")
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


def log_step(log: run_log.RunLog, progress: Progress, metrics: Any, fill: float) -> None:
  log.write(progress.step, {**jax.device_get(metrics), "smoothed_loss": progress.smoothed_loss,
                            "segments_truncated": progress.truncated, "fill": fill}, kind="sft")
  tqdm.tqdm.write(f"step {progress.step}: loss {float(metrics['loss']):.4f} "
                  f"(smoothed {progress.smoothed_loss:.4f})")


def train(c: Any, training: common.ShardedTraining, state: rl.TrainState, progress: Progress,
          segments: dict[int, Segment], ckpt: checkpoint_lib.Checkpointer,
          log: run_log.RunLog) -> tuple[rl.TrainState, Progress]:
  """Steps from `progress` until `finished`, checkpointing every `checkpoint.every` and last."""
  for _ in tqdm.trange(progress.step, c.num_steps, desc="memex_sft", initial=progress.step,
                       total=c.num_steps):
    batch, pack, queue = next_batch(segments, progress.queue, c.batch.rows, c.batch.seq_len)
    state, metrics = training.step_fn(state, parallel.put_batch(batch, training.batch_shardings))
    progress = progress.after(float(metrics["loss"]), pack.num_truncated, queue)
    done = finished(progress, c)
    if progress.step % c.log_every == 0 or done:
      log_step(log, progress, metrics, pack.fill)
    if progress.step % c.checkpoint.every == 0 or done:
      ckpt.save(progress.step, state, progress.to_host(len(segments)))
    if done:
      break
  return state, progress


def main(argv) -> None:
  del argv
  c = _CONFIG.value
  mesh = common.start_run(c.mesh, c.batch.rows)
  segments = demonstration_segments(demonstrations_dir(c), c.seed)
  model_cfg, params, _ = common.load_model(c.model)
  optimizer = rl.make_optimizer(c.optim.learning_rate, c.optim.weight_decay, c.optim.clip_norm,
                                warmup_steps=c.optim.warmup_steps)
  training = common.sharded_training(model_cfg, params, optimizer,
                                     functools.partial(rl.sft_step, model_cfg, optimizer), mesh,
                                     c.seed, c.batch)
  log = run_log.RunLog(c.workdir)
  ckpt = checkpoint_lib.Checkpointer(os.path.join(c.workdir, "checkpoints"), c.checkpoint.keep)
  try:
    state, progress = resume(ckpt, training.state, len(segments))
    if finished(progress, c):
      print(f"already finished at step {progress.step}; exporting its params")
    else:
      state, progress = train(c, training, state, progress, segments, ckpt, log)
  finally:
    ckpt.close()
    log.close()
  if reached_target(progress, c):
    print(f"target loss {c.target_loss} reached at step {progress.step}")
  exported = common.export_params(c.workdir, progress.step, state.params)
  print(f"SFT params at {exported} (step {progress.step}, smoothed loss "
        f"{progress.smoothed_loss:.4f}); metrics {log.path}")


if __name__ == "__main__":
  jax.config.config_with_absl()
  flags.mark_flag_as_required("config")
  app.run(main)
