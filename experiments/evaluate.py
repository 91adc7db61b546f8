r"""Success, steps, peak working context and memory-tool use of a checkpoint, per memory regime.

  python -m experiments.evaluate --config experiments/configs/evaluate.py \
      --config.checkpoint=DIR [--config.num_games=N]

Greedy decoding, games in a fixed order, the same checkpoint under each regime. Episodes decode
data-parallel on `config.mesh` (default: every device), `config.batch_episodes` at a time, rounded
up to split evenly over it; a game starts as soon as one ends, and turns are decoded in chunks of
`config.chunk_tokens` ids, so one long turn holds no other episode. Every episode's trajectory
(conversation, memory store, metrics) is appended to `trajectories/<split>_<regime>.jsonl` as it
ends, so a stopped evaluation keeps what it played and the same command plays the rest. Prints a
table with standard errors and writes `evaluation.json` (with each split and regime's census of
calls, errors and observations: `agent.census`) and `evaluation.png` under the workdir.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any

from absl import app
from absl import flags
import jax
from ml_collections import config_flags
import tqdm

from memex_jax import parallel
from memex_jax import runs
from memex_jax.agent import AgentConfig, ChatRenderer, EpisodeSpec, census, records, run_episodes
from memex_jax.envs import families
from memex_jax.envs.pooled import PooledEnv
from memex_jax.models.policy import load_policy, serving_view
from memex_jax.runs import plots
from memex_jax.sampling import Sampler, SamplerConfig

_CONFIG = config_flags.DEFINE_config_file("config", None, "experiments/configs/evaluate.py")


def evaluate(c: Any, sampler: Sampler, renderer: ChatRenderer, pool: Any, games: list[str],
             regime: str, path: pathlib.Path, instructions: str) -> list[dict[str, Any]]:
  """The records of `games` under one memory regime, read from `path` where already played,
  played (and appended to `path`) chunk by chunk otherwise; the agent is told `instructions`."""
  agent_cfg = runs.from_section(AgentConfig, c.agent, "config.agent", mode=regime,
                                env_instructions=instructions)
  done = {r["index"]: r for r in records.read_records(path)}
  todo = [i for i in range(len(games)) if i not in done]
  episodes = tqdm.tqdm(total=len(games), desc=f"{path.stem} episodes", initial=len(done))
  turns = tqdm.tqdm(desc=f"{path.stem} turns", unit="turn")

  def save(k: int, trajectory: Any) -> None:
    i = todo[k]
    record = records.trajectory_record(trajectory, index=i, game=games[i])
    records.write_records(path, [record], append=True)
    done[i] = record
    episodes.update(1)

  specs = [EpisodeSpec(PooledEnv(pool, i), games[i], group_id=i) for i in todo]
  run_episodes(sampler, specs, renderer, agent_cfg, on_round=turns.update,
               max_live=sampler.config.num_slots, on_end=save)
  episodes.close()
  turns.close()
  return [done[i] for i in range(len(games))]


def check_resumable(c: Any, out: pathlib.Path) -> None:
  """Records what is evaluated; refuses a workdir whose trajectories came from something else."""
  what = {"checkpoint": c.checkpoint, "seed": c.seed, "batch_episodes": c.batch_episodes,
          **{k: c[k].to_dict() for k in ("model", "games", "env", "agent", "chat")}}
  path = out / "trajectories" / "evaluated.json"
  if path.exists():
    before = json.loads(path.read_text())
    if before != json.loads(json.dumps(what)):
      changed = sorted(k for k in what if before.get(k) != json.loads(json.dumps(what[k])))
      raise SystemExit(f"{out} holds the trajectories of another evaluation (differs in "
                       f"{changed}); use another --config.workdir")
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(what, indent=1))


@runs.exits_on_config_error
def main(argv) -> None:
  del argv
  c = _CONFIG.value
  mesh = runs.start_run(c.mesh)
  compiled = runs.compiles.watch()
  out = pathlib.Path(c.workdir)
  check_resumable(c, out)
  model_cfg, params, tokenizer = runs.from_section(load_policy, c.model, "config.model")
  if c.checkpoint:
    params = runs.import_params(c.checkpoint, params)
  slots = parallel.round_up_batch(c.batch_episodes, mesh)
  sampler = Sampler(*serving_view(model_cfg, params), tokenizer, SamplerConfig(
      num_slots=slots, cache_length=c.agent.context_window, temperature=0.0, seed=c.seed,
      chunk_tokens=c.chunk_tokens),
      mesh=mesh)
  print(f"decoding {slots} episodes at a time on a {dict(mesh.shape)} mesh")
  renderer = runs.from_section(ChatRenderer, c.chat, "config.chat", tokenizer=tokenizer)
  rows, results, counted = [], {}, {}
  family, pool_options = runs.from_section(families.select, c.env, "config.env")
  sizes = {split: runs.from_section(family.split_size, {}, "config.splits", split=split)
           for split in c.splits}  # checked before any engine starts
  pool = runs.from_section(family.make_pool, pool_options, "config.env", num_workers=slots)
  try:
    for split in c.splits:
      num = sizes[split] if c.num_games < 0 else c.num_games
      games = runs.from_section(family.tasks, c.games, "config.games", split=split, num=num)
      for regime in c.regimes:
        played = evaluate(c, sampler, renderer, pool, games, regime,
                          out / "trajectories" / f"{split}_{regime}.jsonl", family.instructions)
        summary = records.summarize([r["metrics"] for r in played])
        results[f"{split}/{regime}"] = summary
        counted[f"{split}/{regime}"] = census.take_census(
            played, c.agent.get("env_tool", AgentConfig.env_tool)).as_dict()
        rows.append({"label": f"{split}\n{regime}", **summary})
  finally:
    pool.close()
  stats = dataclasses.asdict(sampler.stats)  # this process's decoding (a resumed run: its part)
  (out / "evaluation.json").write_text(json.dumps(
      {"checkpoint": c.checkpoint, "results": results, "census": counted, "sampler": stats,
       "compiles": {**dataclasses.asdict(compiled), "seconds": compiled.seconds}}, indent=1))
  print(f"\n{'split/regime':28s} {'success':>15s} {'steps':>7s} {'peak_work':>9s} "
        f"{'compress':>8s} {'read':>6s}")
  for name, s in results.items():
    print(f"{name:28s} {s['success']:7.3f} ± {s['success_se']:.3f} {s['steps']:7.1f} "
          f"{s['peak_working']:9.0f} {s['num_compress']:8.2f} {s['num_read']:6.2f}")
  print(f"sampler: {stats['calls']} calls, {stats['generated_tokens']} ids generated in "
        f"{stats['decode_s']:.0f} s of decode, {stats['prefill_tokens']} prefilled in "
        f"{stats['prefill_s']:.0f} s; {compiled.compiles} XLA compiles took {compiled.seconds:.0f} s "
        "of those and the set-up")
  plots.plot_evaluation(rows, out)
  print(f"wrote {out / 'evaluation.json'}, {out / 'evaluation.png'} and the trajectories under "
        f"{out / 'trajectories'}")


if __name__ == "__main__":
  jax.config.config_with_absl()
  flags.mark_flag_as_required("config")
  app.run(main)
