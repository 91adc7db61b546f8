r"""SFT warm start: next-token loss on the assistant tokens of Memex-format expert demonstrations.

  python -m experiments.memex_sft --config experiments/configs/memex_sft.py \
      --config.workdir=/tmp/memex_sft

Generates ALFWorld games and demonstrations when missing, packs demonstration segments into
fixed [rows, seq_len] batches (truncations counted), trains until `num_steps` or the smoothed
loss reaches `target_loss`, and saves a checkpoint that memex_grpo can start from.
"""

from __future__ import annotations

import functools
import os

from absl import app
from absl import flags
import jax
import numpy as np
from ml_collections import config_flags
import tqdm

from experiments import common
from memex_jax import checkpoint as checkpoint_lib
from memex_jax import parallel
from memex_jax import plots
from memex_jax import rl
from memex_jax import run_log
from memex_jax.agent.trajectory import Segment
from memex_jax.envs.alfworld import demonstration_dataset
from memex_jax.envs.alfworld import demonstrations

_CONFIG = config_flags.DEFINE_config_file("config", None, "experiments/configs/memex_sft.py")


def demonstration_segments(folder: str, seed: int) -> list[Segment]:
  """Every demonstration segment as a training Segment (no rollout logprobs, no reward)."""
  segments = [Segment(token_ids=ids, loss_mask=mask, rollout_logprobs=np.zeros(len(ids), np.float32),
                      trajectory_id=i, group_id=0, segment_index=0, messages=(), reward=0.0,
                      metrics=None)
              for i, (ids, mask) in enumerate(demonstration_dataset.iter_sft_examples(folder))]
  np.random.default_rng(seed).shuffle(segments)
  return segments


def main(argv) -> None:
  del argv
  c = _CONFIG.value
  parallel.maybe_initialize()
  mesh = common.make_mesh_or_exit(c.mesh, c.batch.rows)
  demo_dir = c.demos.dir or os.path.join(c.workdir, "demonstrations")
  if not os.path.exists(os.path.join(demo_dir, demonstration_dataset.SUMMARY)):
    games = common.alfworld_games(c.env)
    config = demonstrations.DemonstrationConfig(agent=demonstrations.smollm2_agent_config(
        context_window=c.demos.context_window, threshold=c.demos.threshold))
    summary = demonstration_dataset.write_demonstrations(games, demo_dir, c.demos.num, c.seed,
                                                         workers=c.env.workers, config=config)
    print(f"demonstrations: {summary['demonstrations']} written, {summary['failed']} failed; "
          f"{summary['share_crossing_threshold']:.0%} cross the threshold, "
          f"{summary['share_with_used_read']:.0%} use a ReadExperience")
  segments = demonstration_segments(demo_dir, c.seed)

  model_cfg, params, _ = common.load_model(c.model)
  optimizer = rl.make_optimizer(c.optim.learning_rate, c.optim.weight_decay, c.optim.clip_norm,
                                warmup_steps=c.optim.warmup_steps)
  p_shard = parallel.param_shardings(model_cfg, mesh)
  state = rl.TrainState.create(jax.device_put(params, p_shard), optimizer,
                               jax.random.PRNGKey(c.seed))
  s_shard = parallel.train_state_shardings(state, mesh, p_shard, optimizer)
  state = jax.device_put(state, s_shard)
  b_shard = parallel.batch_shardings(rl.empty_batch(c.batch.rows, c.batch.seq_len), mesh)
  step_fn = parallel.shard_step(functools.partial(rl.sft_step, model_cfg, optimizer), mesh,
                                s_shard, b_shard)
  log = run_log.RunLog(c.workdir)
  ckpt = checkpoint_lib.Checkpointer(os.path.join(c.workdir, "checkpoints"), c.checkpoint.keep)
  queue, smoothed, truncated = list(segments), None, 0
  try:
    for step in tqdm.trange(1, c.num_steps + 1, desc="memex_sft"):
      if not queue:
        queue = list(segments)  # next epoch
      batch, pack = rl.pack_segments(queue, None, c.batch.rows, c.batch.seq_len)
      queue = list(pack.leftovers)
      truncated += pack.num_truncated
      state, metrics = step_fn(state, parallel.put_batch(batch, b_shard))
      loss = float(metrics["loss"])
      smoothed = loss if smoothed is None else 0.9 * smoothed + 0.1 * loss
      if step % c.log_every == 0 or step == c.num_steps:
        log.write(step, {**jax.device_get(metrics), "smoothed_loss": smoothed,
                         "segments_truncated": truncated, "fill": pack.fill}, kind="sft")
        tqdm.tqdm.write(f"step {step}: loss {loss:.4f} (smoothed {smoothed:.4f})")
      if smoothed < c.target_loss:
        print(f"target loss {c.target_loss} reached at step {step}")
        break
    ckpt.save(step, state, {"sft_step": step, "sft_loss": smoothed})
  finally:
    ckpt.close()
    log.close()
  exported = common.export_params(c.workdir, step, state.params)
  print(f"SFT params at {exported} (step {step}, smoothed loss {smoothed:.4f}); metrics {log.path}")


if __name__ == "__main__":
  jax.config.config_with_absl()
  flags.mark_flag_as_required("config")
  app.run(main)
