r"""The SFT dataset of expert demonstrations: segment shards, trajectories, a summary.

  python -m memex_jax.demos.dataset --games DIR --out DIR --num N --seed S [--prior JSON]

Each worker process plays tasks with its own engine and the expert of the task's family
(`demos.alfworld` or `demos.appworld`: their `demonstrator`); a task whose expert solution
fails is reported in the summary, not written. The command line writes ALFWorld's.
`iter_sft_examples` reads the segments back as (token_ids, loss_mask) pairs for supervised
fine-tuning.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import functools
import importlib
import json
import multiprocessing
import os
import random
import sys
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import tqdm

from memex_jax.agent import ChatRenderer
from memex_jax.agent.parser import parse_turn
from memex_jax.agent.presets import smollm2_alfworld
from memex_jax.demos import alfworld
from memex_jax.demos import search_prior
from memex_jax.demos.errors import DemonstrationError
from memex_jax.envs.alfworld import games
from memex_jax.memory.tools import COMPRESS
from memex_jax.models.pretrained import smollm2_gguf_path
from memex_jax.rl.sample import trained_runs
from memex_jax.tokenizers import Tokenizer

SEGMENTS_PREFIX, TRAJECTORIES, SUMMARY = "segments", "trajectories.jsonl", "summary.json"
SEARCH_PRIOR = "search_prior.json"


def compresses(record: dict[str, Any]) -> bool:
  """The segment ends with the expert's CompressExperience call (every segment but an episode's
  last does)."""
  last = record["messages"][-1]
  call = parse_turn(last["content"]).call if last["role"] == "assistant" else None
  return call is not None and call.name == COMPRESS


def weigh_last_turn(mask: np.ndarray, weight: int) -> np.ndarray:
  """`mask` with its last run of trained tokens (the segment's last assistant turn) at `weight`."""
  runs = trained_runs(mask)
  if not runs:
    return mask
  out = mask.copy()
  out[runs[-1]] *= weight
  return out


def _segment_shards(path: str) -> list[str]:
  """The segment files of a dataset folder (or the one file given), in name order."""
  shards = ([path] if os.path.isfile(path) else
            sorted(os.path.join(path, f) for f in os.listdir(path)
                   if f.startswith(SEGMENTS_PREFIX) and f.endswith(".jsonl")))
  if not shards:
    raise FileNotFoundError(f"no {SEGMENTS_PREFIX}-*.jsonl shards in {path}")
  return shards


def iter_sft_examples(path: str, keep_demo: Callable[[int], bool] | None = None,
                      compress_weight: int = 1) -> Iterator[tuple[np.ndarray, np.ndarray]]:
  """(token_ids [T] int32, loss_mask [T] int32) of every segment of a dataset folder or shard
  (only the segments of demonstrations whose number `keep_demo` accepts, when given).

  With `compress_weight` > 1, the tokens of each CompressExperience turn weigh that many times
  a token of any other turn in the SFT loss: the choice to compress is one turn of ~19 in a
  demonstration, and a policy cloned without the weight learned the survey but not the cue.
  """
  if compress_weight < 1:
    raise ValueError(f"compress_weight={compress_weight} must be >= 1")
  for shard in _segment_shards(path):
    with open(shard) as f:
      for line_number, line in enumerate(f, 1):
        record = json.loads(line)
        if keep_demo is not None and not keep_demo(int(record["demo"])):
          continue
        ids, mask = (np.asarray(record[k], np.int32) for k in ("token_ids", "loss_mask"))
        if ids.shape != mask.shape:
          raise ValueError(f"{shard}:{line_number}: token_ids and loss_mask differ in length")
        if compress_weight > 1 and compresses(record):
          mask = weigh_last_turn(mask, compress_weight)
        yield ids, mask


def demonstration_records(folder: str) -> list[dict[str, Any]]:
  """The whole demonstrations of a dataset folder (not the openings) as episode records
  (`agent.records`' form: game, trajectory_id, task, metrics, segments as message lists), in
  the order written."""
  messages: dict[int, dict[int, list[dict[str, str]]]] = collections.defaultdict(dict)
  for shard in _segment_shards(folder):
    with open(shard) as f:
      for line in f:
        segment = json.loads(line)
        messages[segment["demo"]][segment["segment_index"]] = segment["messages"]
  out = []
  with open(os.path.join(folder, TRAJECTORIES)) as f:
    for line in f:
      demo = json.loads(line)
      if demo.get("opening"):
        continue
      segments = messages.get(demo["demo"], {})
      out.append({"game": demo["game"], "trajectory_id": demo["demo"], "task": demo["task_text"],
                  "metrics": demo["metrics"], "segments": [segments[i] for i in sorted(segments)]})
  return out


def _new_worker(family: str, config: Any) -> dict[str, Any]:
  """What one process demonstrates with: its family's expert on its own engine, rendered for
  SmolLM2 (the family's modules are imported here, in the process that plays)."""
  expert = importlib.import_module(f"memex_jax.demos.{family}")
  env, demonstrate = expert.demonstrator(
      config, ChatRenderer(Tokenizer.from_gguf(smollm2_gguf_path())))
  return dict(env=env, demonstrate=demonstrate, stats=expert.demonstration_stats,
              task_type=expert.task_type)


def _demonstrate(worker: dict[str, Any], job: tuple[int, str, str, int, bool]) -> dict[str, Any]:
  demo, root, game, seed, opening = job
  record = {"demo": demo, "game": os.path.relpath(game, root) if root else game, "seed": seed,
            "opening": opening}
  try:
    trajectory = (worker["demonstrate"](game, seed, True) if opening else
                  worker["demonstrate"](game, seed))
    task_type = worker["task_type"](game)
  except (DemonstrationError, ValueError, FileNotFoundError) as e:
    return {**record, "error": str(e)}
  segments = [{"segment_index": s.sample.index, "token_ids": s.sample.token_ids.tolist(),
               "loss_mask": s.sample.loss_mask.tolist(),
               "messages": [{"role": m.role, "content": m.content} for m in s.messages]}
              for s in trajectory.segments]
  return {**record, "task_text": trajectory.task_text, "segments": segments,
          "memory": trajectory.memory, "metrics": trajectory.metrics.as_dict(),
          "stats": worker["stats"](trajectory), "task_type": task_type}


# Each pool process's worker, built by the pool's initializer: a pool task is sent by name, so
# it finds its process's engine here. The single-process path passes its worker instead.
_POOL_WORKER: dict[str, Any] = {}


def _init_pool_worker(family: str, config: Any) -> None:
  _POOL_WORKER.update(_new_worker(family, config))


def _demonstrate_in_pool(job: tuple[int, str, str, int, bool]) -> dict[str, Any]:
  return _demonstrate(_POOL_WORKER, job)


def _summarize(done: list[dict[str, Any]], failed: list[dict[str, Any]]) -> dict[str, Any]:
  """Dataset totals and the two shares that matter for teaching memory use (of the whole
  demonstrations; openings are counted apart)."""
  openings = [r for r in done if r["opening"]]
  done = [r for r in done if not r["opening"]]
  def mean(values):
    return float(np.mean(values)) if done else 0.0
  stats = [r["stats"] for r in done]
  metrics = [r["metrics"] for r in done]
  return {
      "demonstrations": len(done), "failed": sum(not r["opening"] for r in failed),
      "openings": len(openings), "failed_openings": sum(r["opening"] for r in failed),
      "opening_segments": sum(r["metrics"]["num_segments"] for r in openings),
      "opening_tokens": sum(r["metrics"]["total_tokens"] for r in openings),
      "failures": [{"game": r["game"], "error": r["error"], "opening": r["opening"]}
                   for r in failed],
      "share_crossing_threshold": mean([s["crossed_threshold"] for s in stats]),
      "share_with_used_read": mean([s["reads_used"] > 0 for s in stats]),
      "share_with_anchor_and_explicit_blocks": mean(
          [s["anchor_blocks"] > 0 and s["explicit_blocks"] > 0 for s in stats]),
      "share_with_empty_search": mean([s["empty_searches"] > 0 for s in stats]),
      "mean_empty_searches": mean([s["empty_searches"] for s in stats]),
      "mean_refused": mean([s["refused"] for s in stats]),
      "mean_steps": mean([m["steps"] for m in metrics]),
      "mean_tokens": mean([m["total_tokens"] for m in metrics]),
      "mean_segments": mean([m["num_segments"] for m in metrics]),
      "mean_reads": mean([s["reads"] for s in stats]),
      "peak_working": max([m["peak_working"] for m in metrics], default=0),
      "longest_turn": max([s["longest_turn"] for s in stats], default=0),
      "segments": sum(m["num_segments"] for m in metrics),
      "tokens": sum(m["total_tokens"] for m in metrics),
      "task_types": dict(sorted(collections.Counter(r["task_type"] for r in done).items())),
  }


def write_demonstrations(game_folders: Sequence[str], out: str, num: int, seed: int,
                         workers: int = 1, shards: int = 4, config: Any = None,
                         games_root: str | None = None, progress: bool = True,
                         family: str = "alfworld", openings: int = 0) -> dict[str, Any]:
  """Demonstrates `num` tasks of a family (seeded order, cycling) into `out`; returns the summary.

  Then `openings` more games of that order (the ones after the demonstrated games, where there
  are enough) give only their opening (`alfworld.make_opening`: the look and the turn that
  writes the task plan), written as demonstrations numbered from `num` and flagged "opening"
  in trajectories.jsonl.

  Writes `segments-XXXXX-of-YYYYY.jsonl` (one segment per line: demo, game, seed,
  segment_index, token_ids, loss_mask, messages), `trajectories.jsonl` (per demonstration:
  game, metrics, memory stats, archive), `summary.json` and the search prior the expert used
  (`search_prior.json`, when it had one). Failed games are reported in the summary, not written.

  Args:
    game_folders: the games to draw from.
    out: the dataset folder.
    num: demonstrations to make.
    seed: fixes the game order and every demonstration's search order and wording.
    workers: processes, each with its own engine.
    shards: segment files; a demonstration's segments share one.
    config: the family's `DemonstrationConfig` (None: its default): agent and env settings,
      and for ALFWorld the search prior (estimated from training games only).
    games_root: game ids are paths relative to it (default: the paths as given).
    progress: show a progress bar.
    family: 'alfworld' or 'appworld': whose expert plays (`demos.<family>`).
    openings: games that give only their opening (ALFWorld with plan_steps).
  """
  if not game_folders or num < 1 or shards < 1 or workers < 1 or openings < 0:
    raise ValueError(f"need games, num >= 1, shards >= 1, workers >= 1 and openings >= 0 (got "
                     f"{len(game_folders)} games, {num}, {shards}, {workers}, {openings})")
  if openings and family != "alfworld":
    raise ValueError(f"openings teach ALFWorld's task plan; the {family} expert writes none")
  order = sorted(game_folders)
  random.Random(f"demo-order-{seed}").shuffle(order)
  jobs = [(i, games_root or "", order[i % len(order)], seed * 1_000_003 + i, i >= num)
          for i in range(num + openings)]
  if config is None:
    config = importlib.import_module(f"memex_jax.demos.{family}").DemonstrationConfig()
  os.makedirs(out, exist_ok=True)
  if getattr(config, "prior", None):
    config.prior.save(os.path.join(out, SEARCH_PRIOR))
  bar = functools.partial(tqdm.tqdm, total=len(jobs), desc="demonstrations",
                          disable=not progress)
  done, failed = [], []
  with contextlib.ExitStack() as stack:
    if workers == 1:  # In this process: its one engine serves every demonstration.
      worker = _new_worker(family, config)
      stack.callback(getattr(worker["env"], "close", lambda: None))
      results = map(functools.partial(_demonstrate, worker), jobs)
    else:
      pool = stack.enter_context(multiprocessing.get_context("spawn").Pool(
          workers, _init_pool_worker, (family, config)))
      results = pool.imap(_demonstrate_in_pool, jobs)
    files = [stack.enter_context(open(os.path.join(
        out, f"{SEGMENTS_PREFIX}-{k:05d}-of-{shards:05d}.jsonl"), "w")) for k in range(shards)]
    trajectories = stack.enter_context(open(os.path.join(out, TRAJECTORIES), "w"))
    for result in bar(results):
      if "error" in result:
        failed.append(result)
        continue
      header = {k: result[k] for k in ("demo", "game", "seed")}
      for segment in result.pop("segments"):
        files[result["demo"] % shards].write(json.dumps({**header, **segment}) + "\n")
      trajectories.write(json.dumps(result) + "\n")
      done.append(result)
  summary = _summarize(done, failed)
  with open(os.path.join(out, SUMMARY), "w") as f:
    # The demonstrator's own settings: the ALFWorld expert's levers (AppWorld's has none).
    settings = {field.name: getattr(config, field.name) for field in dataclasses.fields(config)
                if field.name not in ("agent", "env", "prior")}
    json.dump({"seed": seed, "agent": dataclasses.asdict(config.agent), **settings, **summary},
              f, indent=1, default=str)
  return summary


def main(argv: Sequence[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--games", required=True, help="game root (generate.py's --out)")
  parser.add_argument("--split", default="train")
  parser.add_argument("--out", required=True, help="dataset folder")
  parser.add_argument("--num", type=int, required=True, help="demonstrations to write")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                      help="processes, one engine each")
  parser.add_argument("--shards", type=int, default=4)
  preset = smollm2_alfworld()
  parser.add_argument("--context-window", type=int, default=preset.context_window)
  parser.add_argument("--threshold", type=int, default=preset.threshold,
                      help="compression threshold tau (default: the SmolLM2 preset's)")
  parser.add_argument("--prompt-style", default=preset.prompt_style, choices=("full", "compact"),
                      help="the system prompt's form (AgentConfig.prompt_style)")
  parser.add_argument("--max-turn-tokens", type=int, default=preset.max_turn_tokens,
                      help="cap on one turn, the evaluated agent's: a longer CompressExperience "
                      "turn falls back to brief notes, or fails the demonstration")
  parser.add_argument("--slip-rate", type=float, default=0.0,
                      help="chance per action that the expert first repeats its previous "
                      "command, refused by the engine, and recovers (slips are not trained on)")
  parser.add_argument("--wrong-take-rate", type=float, default=0.0,
                      help="chance per decision to search on that the expert first takes the "
                      "kind from the place without it, refused, and recovers (not trained on)")
  parser.add_argument("--wrong-next-rate", type=float, default=0.0,
                      help="chance per go to a written search order's next place that the "
                      "expert first goes to the place it is at, refused, and recovers (not "
                      "trained on)")
  parser.add_argument("--plan-steps", action="store_true",
                      help="the expert writes its task plan and looks each next step up in it")
  parser.add_argument("--found-weight", type=int, default=1,
                      help="weight in the SFT loss of a turn that takes what a search just found")
  parser.add_argument("--plan-weight", type=int, default=1,
                      help="weight in the SFT loss of the turn that first writes the task plan "
                      "(with --plan-steps)")
  parser.add_argument("--restate-task", action="store_true",
                      help="the turn that writes the task plan first copies the task's words "
                      "(with --plan-steps)")
  parser.add_argument("--restate-location", action="store_true",
                      help="every action turn and summary says where the expert is, after what "
                      "it holds (\"Holding: nothing. At: drawer 3.\")")
  parser.add_argument("--plan-openings", type=int, default=0,
                      help="games after the demonstrated ones that give only their opening: the "
                      "look and the turn that writes the task plan (with --plan-steps)")
  parser.add_argument("--decision-weight", type=int, default=1,
                      help="weight in the SFT loss of the token that decides, after a searched "
                      "place's contents are restated, whether the kind is there")
  parser.add_argument("--prior", help="a saved search prior (search_prior.json) estimated from "
                      "training games; default: estimated from the --split games")
  args = parser.parse_args(argv)
  if (args.plan_openings or args.restate_task) and not args.plan_steps:
    parser.error("--plan-openings and --restate-task go with the task plan: --plan-steps")
  game_folders = games.find_games(args.games, args.split)
  # The expert's search order comes from training games: a saved prior, or the games played.
  prior = (search_prior.SearchPrior.load(args.prior) if args.prior else
           search_prior.estimate(game_folders))
  config = alfworld.DemonstrationConfig(
      agent=smollm2_alfworld(context_window=args.context_window, threshold=args.threshold,
                             prompt_style=args.prompt_style,
                             max_turn_tokens=args.max_turn_tokens),
      prior=prior, slip_rate=args.slip_rate, wrong_take_rate=args.wrong_take_rate,
      wrong_next_rate=args.wrong_next_rate, plan_steps=args.plan_steps,
      found_weight=args.found_weight, plan_weight=args.plan_weight, restate_task=args.restate_task,
      restate_location=args.restate_location, decision_weight=args.decision_weight)
  summary = write_demonstrations(game_folders, args.out, args.num, args.seed, args.workers,
                                 args.shards, config, args.games, openings=args.plan_openings)
  print(json.dumps({k: v for k, v in summary.items() if k != "failures"}, indent=1))
  print(f"{summary['share_crossing_threshold']:.0%} of the demonstrations cross the compression "
        f"threshold; {summary['share_with_used_read']:.0%} need a ReadExperience whose content a "
        f"later action uses; {summary['share_with_empty_search']:.0%} search an empty place "
        f"first. Mean length: {summary['mean_steps']:.1f} steps, {summary['mean_tokens']:.0f} "
        "tokens.")
  if args.plan_openings:
    print(f"{summary['openings']} openings ({summary['failed_openings']} failed): "
          f"{summary['opening_segments']} segments, {summary['opening_tokens']} tokens.")
  for failure in summary["failures"]:
    print(f"failed: {failure['game']}: {failure['error']}")
  sys.stdout.flush()


if __name__ == "__main__":
  main()
