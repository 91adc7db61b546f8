r"""MemexRL: segmented GRPO with PPO clipping, TIS and KL on ALFWorld (harder variant) or AppWorld.

  python -m experiments.memex_grpo --config experiments/configs/memex_grpo.py \
      --config.workdir=/tmp/memex_grpo [--config.num_iterations=N] [--config.env.name=appworld]

One iteration, as `iteration` reads: B games x G rollouts through the agent loop (JAX sampler,
persistent KV slots, the family's engines in worker processes; Eq. 1 rewards at each episode's end)
-> GRPO advantages per group, inherited by every segment -> every segment packed into as many
[rows, seq] minibatches as it needs -> old and reference logprobs -> PPO epochs -> metrics,
checkpoint, plots. A killed run resumes from its last complete checkpoint and replays the same
episodes (the game order, the learner rng and the sampler rng are all in the checkpoint).

Without `config.init_checkpoint`, the run first warm-starts the policy (`config.warm_start`): the
SFT entry point, in its own process, on expert demonstrations written for this run's agent
settings, into <workdir>/warm_start; a finished one is reused and a killed one resumes.
"""

from __future__ import annotations

import functools
import os
import pathlib
import subprocess
import sys
import time
from typing import Any

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import numpy as np
from ml_collections import config_flags
import tqdm

from experiments.configs import memex_sft as sft_config
from memex_jax import parallel
from memex_jax import rl
from memex_jax import runs
from memex_jax.agent import AgentConfig, ChatRenderer, EpisodeSpec, records, run_episodes
from memex_jax.envs import families
from memex_jax.envs.pooled import PooledEnv
from memex_jax.models.policy import load_policy, serving_view
from memex_jax.runs import flops
from memex_jax.runs import plots
from memex_jax.sampling import Sampler, SamplerConfig

_CONFIG = config_flags.DEFINE_config_file("config", None, "experiments/configs/memex_grpo.py")


def rollouts(c: Any, it: int, games: list[str], order: np.ndarray, pool: Any, sampler: Sampler,
             renderer: ChatRenderer, agent_cfg: AgentConfig) -> list[Any]:
  """Iteration `it`'s trajectories: G rollouts of each of its B games, one group per game."""
  b, g = c.rollout.prompts_per_iteration, c.rollout.group_size
  picks = [games[order[(it * b + j) % len(games)]] for j in range(b)]
  specs = [EpisodeSpec(PooledEnv(pool, j * g + k), game, group_id=j)
           for j, game in enumerate(picks) for k in range(g)]
  return run_episodes(sampler, specs, renderer, agent_cfg, first_trajectory_id=it * b * g)


def warm_start_flags(c: Any) -> list[str]:
  """memex_sft's flags for `c`'s warm start: the model, env, games and agent settings of `c`."""
  w, a = c.warm_start, c.agent
  settings = {
      "workdir": os.path.join(c.workdir, "warm_start"), "seed": c.seed,
      "model.gguf": c.model.gguf, "model.dtype": c.model.dtype, "model.int4": c.model.int4,
      "model.remat": c.model.remat, "model.no_grad_layers": c.model.no_grad_layers,
      "model.matmul_dtype": c.model.matmul_dtype,
      "env.name": c.env.name, "games.dir": c.games.dir, "games.split": c.games.split,
      "games.seed": c.games.seed, "games.workers": c.games.workers, "games.num": w.games,
      "demos.num": w.demos, "demos.agent.context_window": w.demo_context_window,
      "demos.agent.threshold": a.threshold, "demos.agent.summary_token_budget":
          a.summary_token_budget, "demos.agent.prompt_style": a.prompt_style,
      "demos.agent.offer_free_index": a.offer_free_index,
      "batch.rows": 1, "batch.seq_len": w.seq_len, "optim.learning_rate": w.learning_rate,
      "num_steps": w.num_steps, "max_minutes": w.max_minutes, "heldout.one_in": 0,
      "log_every": 5, "checkpoint.every": 10}
  return [f"--config.{key}={value}" for key, value in settings.items()]


def warm_start(c: Any) -> str:
  """The params export RL starts from: `config.init_checkpoint`, else the warm start's (its SFT
  run first unless its export exists), else '' (the packaged weights)."""
  if c.init_checkpoint or c.warm_start.num_steps <= 0:
    return c.init_checkpoint
  export = os.path.join(c.workdir, "warm_start", runs.EXPORT_DIR)
  if os.path.isdir(export):
    print(f"warm start: reusing {export}")
    return export
  command = [sys.executable, "-m", "experiments.memex_sft", "--config", sft_config.__file__,
             *warm_start_flags(c)]
  print(f"warm start: {c.warm_start.num_steps} SFT steps at most ({c.warm_start.max_minutes} "
        f"minutes) on {c.warm_start.demos} expert demonstrations, into {export}")
  repository = pathlib.Path(sft_config.__file__).parents[2]  # where `-m experiments...` resolves
  if subprocess.run(command, cwd=repository, check=False).returncode != 0:
    raise SystemExit(f"the warm start failed (its output is above); rerun to resume it, or pass "
                     f"--config.init_checkpoint=<params> or --config.warm_start.num_steps=0. "
                     f"Command: {' '.join(command)}")
  return export


@runs.exits_on_config_error
def main(argv) -> None:
  del argv
  c = _CONFIG.value
  mesh = runs.start_run(c.mesh, c.batch.rows)
  init_checkpoint = warm_start(c)
  log = runs.RunLog(c.workdir)
  model_cfg, params, tokenizer = runs.from_section(load_policy, c.model, "config.model")
  loss_cfg = runs.from_section(rl.LossConfig, c.loss, "config.loss",
                               temperature=c.sampler.temperature)
  estimate_advantages = runs.from_section(rl.advantage_fn, c.advantage, "config.advantage")
  optimizer = runs.from_section(rl.make_optimizer, c.optim, "config.optim")
  family, pool_options = runs.from_section(families.select, c.env, "config.env")
  agent_cfg = runs.from_section(AgentConfig, c.agent, "config.agent",
                                env_instructions=family.instructions)
  renderer = runs.from_section(ChatRenderer, c.chat, "config.chat", tokenizer=tokenizer)

  training = runs.sharded_training(
      model_cfg, params, optimizer, functools.partial(rl.train_step, model_cfg, loss_cfg,
                                                      optimizer),
      mesh, c.seed, c.batch.rows, c.batch.seq_len, init_checkpoint=init_checkpoint)
  state = training.state
  # The frozen reference policy: a copy, since the train step donates the state's buffers.
  ref_params = jax.tree.map(jnp.copy, state.params)
  fill = functools.partial(rl.fill_logprobs, model_cfg, temperature=loss_cfg.temperature,
                           chunk_size=loss_cfg.logit_chunk)
  shardings = (training.params_shardings, training.batch_shardings)
  fill_old = parallel.sharded_jit(fill, mesh, shardings, training.batch_shardings)
  fill_ref = parallel.sharded_jit(functools.partial(fill, field="ref_logprobs"), mesh,
                                  shardings, training.batch_shardings)

  ckpt = runs.Checkpointer(f"{c.workdir}/checkpoints", max_to_keep=c.checkpoint.keep)
  first_iteration, sampler_seed = 0, c.seed + 1
  restored = runs.restore_latest(ckpt, state)
  if restored is not None:
    state, first_iteration = restored.state, int(restored.host["iteration"])
    print(f"resuming at iteration {first_iteration} from checkpoint {restored.step}")

  games = runs.from_section(family.tasks, c.games, "config.games")
  order = np.random.default_rng(c.seed).permutation(len(games))
  num_rollouts = c.rollout.prompts_per_iteration * c.rollout.group_size
  # Rollouts decode data-parallel on the training mesh.
  sampler = Sampler(*serving_view(model_cfg, state.params), tokenizer, runs.from_section(
      SamplerConfig, c.sampler, "config.sampler", seed=sampler_seed,
      num_slots=parallel.round_up_batch(num_rollouts, mesh), cache_length=agent_cfg.context_window),
      mesh=mesh)
  if restored is not None:
    sampler.rng = runs.key_from_json(restored.host["sampler_rng"])
  peak = flops.matmul_peak_flops(model_cfg.dtype, 1024)

  pool = runs.from_section(family.make_pool, pool_options, "config.env",
                           num_workers=num_rollouts)
  try:
    for it in tqdm.trange(first_iteration, c.num_iterations, desc="memex_grpo",
                          initial=first_iteration, total=c.num_iterations):
      # 1. Rollouts, each trajectory with its Eq. 1 reward.
      start = time.perf_counter()
      if it > first_iteration:  # the sampler was built from these params
        sampler.params = serving_view(model_cfg, state.params)[1]
      trajectories = rollouts(c, it, games, order, pool, sampler, renderer, agent_cfg)
      rollout_s = time.perf_counter() - start
      records.write_records(f"{c.workdir}/rollouts/iteration_{it + 1}.jsonl",
                            [records.trajectory_record(t) for t in trajectories])
      metrics = records.summarize([t.metrics.as_dict() for t in trajectories])
      metrics["rollout_tokens_per_s"] = metrics["generated_tokens"] * num_rollouts / rollout_s
      # 2. Advantages per trajectory, normalised within each game's group.
      samples = [s for t in trajectories for s in t.samples]
      adv = estimate_advantages(samples)
      metrics.update(adv.as_dict())  # group/trajectory counters and skip_step (0 or 1)
      if not adv.skip_step:
        # 3. Packing: every sample, in as many [rows, seq_len] minibatches as it takes.
        batch, pack = rl.pack_samples(samples, adv.advantages, c.batch.rows, c.batch.seq_len)
        metrics.update(segments_packed=pack.num_packed, segments_truncated=pack.num_truncated,
                       minibatches=pack.num_minibatches, pack_fill=pack.fill)
        # 4. Old and reference logprobs, one minibatch at a time (one compiled shape).
        batch = rl.map_minibatches(
            lambda mb: fill_ref(ref_params, fill_old(state.params, training.put(mb))),
            batch, c.batch.rows)
        # 5. PPO epochs: one update per minibatch per epoch.
        learn_start = time.perf_counter()
        state, learn = rl.ppo_epochs(training.step_fn, state, batch, minibatch_rows=c.batch.rows,
                                     num_epochs=c.ppo.epochs, needs_reference=loss_cfg.kl_coef > 0)
        learn_s = time.perf_counter() - learn_start
        tokens = float(np.count_nonzero(batch.segment_ids)) * c.ppo.epochs
        learn_flops = flops.train_flops_per_token(model_cfg, c.batch.seq_len) * tokens
        metrics.update({f"learner/{k}": v for k, v in learn.items()})
        metrics.update(learner_tokens_per_s=tokens / learn_s, mfu=learn_flops / learn_s / peak)
      # 6. Log and checkpoint.
      log.write(it + 1, metrics)
      tqdm.tqdm.write(f"iteration {it + 1}: success {metrics['success']:.2f} reward "
                      f"{metrics['reward']:.3f} compress {metrics['num_compress']:.2f} read "
                      f"{metrics['num_read']:.2f} grad_norm "
                      f"{metrics.get('learner/grad_norm', 0):.3g}")
      if (it + 1) % c.checkpoint.every == 0 or it + 1 == c.num_iterations:
        ckpt.save(it + 1, state, {"iteration": it + 1,
                                  "sampler_rng": runs.key_to_json(sampler.rng)})
  finally:
    pool.close()
    ckpt.close()
    log.close()
  runs.export_params(c.workdir, c.num_iterations, state.params)
  plots.plot_training(log.path, f"{c.workdir}/plots")
  print(f"metrics: {log.path}; plots: {c.workdir}/plots; checkpoints: {c.workdir}/checkpoints; "
        f"params: {c.workdir}/params")


if __name__ == "__main__":
  jax.config.config_with_absl()
  flags.mark_flag_as_required("config")
  app.run(main)
