r"""Success, steps, peak working context and memory-tool use of a checkpoint, per memory regime.

  python -m experiments.evaluate --config experiments/configs/evaluate.py \
      --config.checkpoint=DIR [--config.num_games=N]

Greedy decoding, games in a fixed order, the same checkpoint under each regime. Episodes decode
data-parallel on `config.mesh` (default: every device), `config.batch_episodes` at a time, rounded
up to split evenly over it. Prints a table with standard errors and writes `evaluation.json` and
`evaluation.png` under the workdir.
"""

from __future__ import annotations

import json
import pathlib

from absl import app
from absl import flags
import jax
from ml_collections import config_flags
import tqdm

from experiments import common
from memex_jax import parallel
from memex_jax import plots
from memex_jax.agent import ChatRenderer, EpisodeSpec, run_episodes
from memex_jax.envs.alfworld import generate as generate_lib
from memex_jax.envs.pooled import PooledEnv
from memex_jax.sampling import Sampler, SamplerConfig

_CONFIG = config_flags.DEFINE_config_file("config", None, "experiments/configs/evaluate.py")


def evaluate(c, sampler, renderer, pool, games, regime: str, desc: str):
  """Trajectories of `games` under one memory regime, as many at a time as the sampler has slots."""
  agent_cfg = common.agent_config(c.agent, mode=regime)
  trajectories = []
  at_once = sampler.config.num_slots
  for start in tqdm.trange(0, len(games), at_once, desc=desc):
    chunk = games[start:start + at_once]
    specs = [EpisodeSpec(PooledEnv(pool, i), game, group_id=start + i)
             for i, game in enumerate(chunk)]
    trajectories += run_episodes(sampler, specs, renderer, agent_cfg, first_trajectory_id=start)
  return trajectories


def main(argv) -> None:
  del argv
  c = _CONFIG.value
  mesh = common.start_run(c.mesh)
  model_cfg, params, tokenizer = common.load_model(c.model)
  if c.checkpoint:
    params = common.import_params(c.checkpoint, params)
  model_cfg, params = common.sampler_view(model_cfg, params)
  slots = parallel.round_up_batch(c.batch_episodes, mesh)
  sampler = Sampler(model_cfg, params, tokenizer, SamplerConfig(
      num_slots=slots, cache_length=c.agent.context_window, temperature=0.0, seed=c.seed),
      mesh=mesh)
  print(f"decoding {slots} episodes at a time on a {dict(mesh.shape)} mesh")
  renderer = ChatRenderer(tokenizer, c.agent.assistant_prefix)
  rows, results = [], {}
  pool = common.make_pool(c.env, slots)
  try:
    for split in c.splits:
      num = generate_lib.OFFICIAL_SIZES[split] if c.num_games < 0 else c.num_games
      games = common.alfworld_games(c.env, split=split, num=num)
      for regime in c.regimes:
        summary = common.summarize(evaluate(c, sampler, renderer, pool, games, regime,
                                            f"{split}/{regime}"))
        results[f"{split}/{regime}"] = summary
        rows.append({"label": f"{split}\n{regime}", **summary})
  finally:
    pool.close()
  out = pathlib.Path(c.workdir)
  out.mkdir(parents=True, exist_ok=True)
  (out / "evaluation.json").write_text(json.dumps(
      {"checkpoint": c.checkpoint, "results": results}, indent=1))
  print(f"\n{'split/regime':28s} {'success':>15s} {'steps':>7s} {'peak_work':>9s} "
        f"{'compress':>8s} {'read':>6s}")
  for name, s in results.items():
    print(f"{name:28s} {s['success']:7.3f} ± {s['success_se']:.3f} {s['steps']:7.1f} "
          f"{s['peak_working']:9.0f} {s['num_compress']:8.2f} {s['num_read']:6.2f}")
  plots.plot_evaluation(rows, out)
  print(f"wrote {out / 'evaluation.json'} and {out / 'evaluation.png'}")


if __name__ == "__main__":
  jax.config.config_with_absl()
  flags.mark_flag_as_required("config")
  app.run(main)
