r"""MemexRL: segmented GRPO with PPO clipping, TIS and KL on ALFWorld (harder variant).

  python -m experiments.memex_grpo --config experiments/configs/memex_grpo.py \
      --config.workdir=/tmp/memex_grpo [--config.num_iterations=N]

One iteration: B games x G rollouts through the agent loop (JAX sampler, persistent KV slots,
ALFWorld engines in worker processes) -> Eq. 1 rewards -> GRPO advantages per group, inherited
by every segment -> packed [rows, seq] batch -> reference logprobs -> PPO epochs -> metrics,
checkpoint, plots. A killed run resumes from its last complete checkpoint and replays the same
episodes (the game order, the learner rng and the sampler rng are all in the checkpoint).
"""

from __future__ import annotations

import functools
import time

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import numpy as np
from ml_collections import config_flags
import tqdm

from experiments import common
from memex_jax import checkpoint as checkpoint_lib
from memex_jax import flops
from memex_jax import parallel
from memex_jax import plots
from memex_jax import rl
from memex_jax import run_log
from memex_jax.agent import ChatRenderer, EpisodeSpec, run_episodes
from memex_jax.envs.pooled import PooledEnv
from memex_jax.sampling import Sampler, SamplerConfig

_CONFIG = config_flags.DEFINE_config_file("config", None, "experiments/configs/memex_grpo.py")


def main(argv) -> None:
  del argv
  c = _CONFIG.value
  mesh = common.start_run(c.mesh, c.batch.rows)
  log = run_log.RunLog(c.workdir)
  model_cfg, params, tokenizer = common.load_model(c.model)
  loss_cfg = rl.LossConfig(clip_low=c.loss.clip_low, clip_high=c.loss.clip_high,
                           tis_cap=c.loss.tis_cap, kl_coef=c.loss.kl_coef,
                           entropy_coef=c.loss.entropy_coef, normalisation=c.loss.normalisation,
                           temperature=c.rollout.temperature)
  optimizer = rl.make_optimizer(c.optim.learning_rate, c.optim.weight_decay, c.optim.clip_norm)

  learner_step = functools.partial(rl.train_step, model_cfg, loss_cfg, optimizer)
  training = common.sharded_training(model_cfg, params, optimizer, learner_step, mesh, c.seed,
                                     c.batch, init_checkpoint=c.init_checkpoint)
  state, step_fn = training.state, training.step_fn
  p_shard, b_shard = training.params_shardings, training.batch_shardings
  # The frozen reference policy: a copy, since the train step donates the state's buffers.
  ref_params = jax.tree.map(jnp.copy, state.params)
  fill = functools.partial(rl.fill_logprobs, model_cfg, temperature=loss_cfg.temperature,
                           chunk_size=loss_cfg.logit_chunk)
  fill_old = parallel.sharded_jit(fill, mesh, (p_shard, b_shard), b_shard)
  fill_ref = parallel.sharded_jit(functools.partial(fill, field="ref_logprobs"), mesh,
                                  (p_shard, b_shard), b_shard)

  ckpt = checkpoint_lib.Checkpointer(f"{c.workdir}/checkpoints", max_to_keep=c.checkpoint.keep)
  first_iteration, sampler_seed = 0, c.seed + 1
  restored = common.restore_latest(ckpt, state)
  if restored is not None:
    state, first_iteration = restored.state, int(restored.host["iteration"])
    print(f"resuming at iteration {first_iteration} from checkpoint {restored.step}")

  games = common.alfworld_games(c.env)
  order = np.random.default_rng(c.seed).permutation(len(games))
  rollouts = c.rollout.prompts_per_iteration * c.rollout.group_size
  renderer = ChatRenderer(tokenizer, c.agent.assistant_prefix)
  agent_cfg = common.agent_config(c.agent)
  sample_cfg, sample_params = common.sampler_view(model_cfg, state.params)
  # Rollouts decode data-parallel on the training mesh.
  sampler = Sampler(sample_cfg, sample_params, tokenizer, SamplerConfig(
      num_slots=parallel.round_up_batch(rollouts, mesh), cache_length=c.agent.context_window,
      temperature=c.rollout.temperature, top_p=c.rollout.top_p, seed=sampler_seed), mesh=mesh)
  if restored is not None:
    sampler.rng = checkpoint_lib.key_from_json(restored.host["sampler_rng"])
  peak = flops.matmul_peak_flops(model_cfg.dtype, 1024)

  pool = common.make_pool(c.env, rollouts)
  try:
    for it in tqdm.trange(first_iteration, c.num_iterations, desc="memex_grpo",
                          initial=first_iteration, total=c.num_iterations):
      start = time.perf_counter()
      picks = [games[order[(it * c.rollout.prompts_per_iteration + j) % len(games)]]
               for j in range(c.rollout.prompts_per_iteration)]
      specs = [EpisodeSpec(PooledEnv(pool, j * c.rollout.group_size + g), game, group_id=j)
               for j, game in enumerate(picks) for g in range(c.rollout.group_size)]
      if it > first_iteration:  # the sampler was built from these params
        sampler.params = common.sampler_view(model_cfg, state.params)[1]
      trajectories = run_episodes(sampler, specs, renderer, agent_cfg,
                                  first_trajectory_id=it * rollouts)
      rollout_s = time.perf_counter() - start
      common.write_trajectories(f"{c.workdir}/rollouts/iteration_{it + 1}.jsonl", trajectories)
      metrics = common.summarize(trajectories)
      metrics["rollout_tokens_per_s"] = metrics["generated_tokens"] * rollouts / rollout_s

      segments = [s for t in trajectories for s in t.segments]
      adv = rl.estimate_advantages("grpo", segments,
                                     drop_uniform_groups=c.loss.drop_uniform_groups)
      metrics.update(adv.as_dict())  # group/trajectory counters and skip_step (0 or 1)
      if not adv.skip_step:
        batch, pack = rl.pack_segments(segments, adv.advantages, c.batch.rows, c.batch.seq_len)
        metrics.update(segments_packed=pack.num_packed, segments_truncated=pack.num_truncated,
                       segments_left_over=len(pack.leftovers))
        # Counted on the host, before the batch is sharded over the devices.
        tokens = float(np.count_nonzero(batch.segment_ids)) * c.optim.ppo_epochs
        batch = fill_ref(ref_params, parallel.put_batch(batch, b_shard))
        learn_start = time.perf_counter()
        state, batch, learn = rl.ppo_iteration(
            model_cfg, loss_cfg, optimizer, state, batch, num_epochs=c.optim.ppo_epochs,
            num_minibatches=c.optim.minibatches, step_fn=step_fn, fill_old_fn=fill_old)
        learn_s = time.perf_counter() - learn_start
        learn_flops = flops.train_flops_per_token(model_cfg, c.batch.seq_len) * tokens
        metrics.update({f"learner/{k}": v for k, v in learn.items()})
        metrics.update(learner_tokens_per_s=tokens / learn_s, mfu=learn_flops / learn_s / peak)
      log.write(it + 1, metrics)
      tqdm.tqdm.write(f"iteration {it + 1}: success {metrics['success']:.2f} reward "
                      f"{metrics['reward']:.3f} compress {metrics['num_compress']:.2f} read "
                      f"{metrics['num_read']:.2f} grad_norm "
                      f"{metrics.get('learner/grad_norm', 0):.3g}")
      if (it + 1) % c.checkpoint.every == 0 or it + 1 == c.num_iterations:
        ckpt.save(it + 1, state, {"iteration": it + 1,
                                  "sampler_rng": checkpoint_lib.key_to_json(sampler.rng)})
  finally:
    pool.close()
    ckpt.close()
    log.close()
  common.export_params(c.workdir, c.num_iterations, state.params)
  plots.plot_training(log.path, f"{c.workdir}/plots")
  print(f"metrics: {log.path}; plots: {c.workdir}/plots; checkpoints: {c.workdir}/checkpoints; "
        f"params: {c.workdir}/params")


if __name__ == "__main__":
  jax.config.config_with_absl()
  flags.mark_flag_as_required("config")
  app.run(main)
