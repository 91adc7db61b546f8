r"""Generates ALFWorld game splits on the shipped floor plans, in the official folder layout.

  python -m memex_jax.envs.alfworld.generate --out DIR --split train --num 3553 --seed 0

writes DIR/train/<task>-<object>-None-<receptacle>-<scene>/trial_<seed>_<index>/{game.tw-pddl,
traj_data.json}, plus DIR/train/manifest.json (one record per game) and histograms.json.
A split already generated with the same version, seed and size is reused from disk (another
generation in the same folder is an error); games already written by an interrupted run are kept.
Game i depends only on (split, seed, i).
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import multiprocessing
import os
import pathlib
import sys
from typing import Any, Sequence

import tqdm

from memex_jax.envs.alfworld import catalog
from memex_jax.envs.alfworld import games
from memex_jax.envs.alfworld import layouts
from memex_jax.envs.alfworld import pddl
from memex_jax.envs.alfworld import sampling

# Bump when generated games change, so cached splits are regenerated.
GENERATOR_VERSION = 1
OFFICIAL_SIZES = {"train": 3553, "valid_seen": 140, "valid_unseen": 134}
MANIFEST = "manifest.json"
HISTOGRAMS = "histograms.json"
_MAX_TRIES = 200
# Where `games_for` generates splits nobody pointed it to.
GAMES_CACHE = (pathlib.Path(os.environ.get("MEMEX_JAX_CACHE", "~/.cache/memex_jax")).expanduser()
               / "alfworld")


def task_type_schedule(split: str, num: int, seed: int) -> list[str]:
  """Task type of each game: ALFWorld's train mix scaled to `num` (largest remainder), shuffled."""
  total = sum(catalog.TRAIN_TASK_MIX.values())
  exact = {t: num * c / total for t, c in catalog.TRAIN_TASK_MIX.items()}
  counts = {t: int(x) for t, x in exact.items()}
  by_remainder = sorted(exact, key=lambda t: (counts[t] - exact[t], t))
  for t in by_remainder[:num - sum(counts.values())]:
    counts[t] += 1
  schedule = [t for t in catalog.TASK_TYPES for _ in range(counts[t])]
  layouts.stable_rng("schedule", split, seed).shuffle(schedule)
  return schedule


def game_spec(split: str, seed: int, index: int, task_type: str) -> sampling.GameSpec:
  """The deterministic game `index` of a split: a random floor plan that can host the task."""
  rng = layouts.stable_rng("game", split, seed, index)
  numbers = [n for n in layouts.floor_plan_numbers(split)
             if catalog.room_of(n) in catalog.task_rooms(task_type)]
  for _ in range(_MAX_TRIES):
    spec = sampling.sample_game(layouts.load_floor_plan(rng.choice(numbers)), task_type, rng)
    if spec is not None:
      return spec
  raise RuntimeError(f"no floor plan of split {split!r} hosts {task_type} after {_MAX_TRIES} "
                     f"tries (game {index}, seed {seed})")


def game_folder(split: str, seed: int, index: int, spec: sampling.GameSpec) -> str:
  """Folder of a game relative to the output root, named like ALFWorld's."""
  task = spec.task
  target = task.parent_target or task.toggle_target
  kind = f"{task.task_type}-{task.object_target}-None-{target}-{spec.floor_plan.number}"
  return os.path.join(split, kind, f"trial_{seed}_{index:05d}")


def _generate_one(args: tuple[str, str, int, int, str]) -> dict[str, Any]:
  out, split, seed, index, task_type = args
  spec = game_spec(split, seed, index, task_type)
  rel = game_folder(split, seed, index, spec)
  folder = os.path.join(out, rel)
  if not all(os.path.exists(os.path.join(folder, f)) for f in (games.GAME_FILE, games.TRAJ_FILE)):
    pddl.write_game(spec, folder, name=f"{split}_{seed}_{index:05d}")
  return {
      "index": index,
      "path": rel,
      "task_type": task_type,
      "floor_plan": spec.floor_plan.number,
      "room": spec.floor_plan.room,
      "num_receptacles": len(spec.floor_plan.receptacles),
      "num_objects": len(spec.objects),
      "plan_length": len(spec.walkthrough),
      "task_text": spec.task_text,
  }


def histograms(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
  """Counts of task type, room, receptacle count (bins of 10) and expert plan length."""
  def count(key):
    return dict(sorted(collections.Counter(key(r) for r in records).items()))
  return {
      "task_type": count(lambda r: r["task_type"]),
      "room": count(lambda r: r["room"]),
      "num_receptacles": count(lambda r: f"{r['num_receptacles'] // 10 * 10:02d}-"
                                         f"{r['num_receptacles'] // 10 * 10 + 9:02d}"),
      "plan_length": count(lambda r: r["plan_length"]),
  }


def format_histograms(split: str, hists: dict[str, dict[str, int]]) -> str:
  lines = [f"== {split}: {sum(hists['task_type'].values())} games"]
  for name, counts in hists.items():
    lines.append(f"  {name}:")
    lines += [f"    {key!s:>32} {value:5d}" for key, value in counts.items()]
  return "\n".join(lines)


def generate_split(out: str, split: str, num: int, seed: int, workers: int | None = None,
                   progress: bool = True) -> list[dict[str, Any]]:
  """Generates (or reuses) `num` games of `split` under `out`; returns the manifest records."""
  manifest_path = os.path.join(out, split, MANIFEST)
  header = {"version": GENERATOR_VERSION, "split": split, "seed": seed, "num": num}
  if os.path.exists(manifest_path):
    with open(manifest_path) as f:
      cached = json.load(f)
    if cached.get("header") != header:
      # Mixing two generations in one folder would leave stray games for the loaders to find.
      raise FileExistsError(f"{os.path.dirname(manifest_path)} holds another generation "
                            f"({cached.get('header')}); use another --out or delete it")
    if all(os.path.exists(os.path.join(out, r["path"], games.GAME_FILE)) for r in cached["games"]):
      return cached["games"]
  schedule = task_type_schedule(split, num, seed)
  jobs = [(out, split, seed, i, t) for i, t in enumerate(schedule)]
  workers = workers or os.cpu_count() or 1
  bar = functools.partial(tqdm.tqdm, total=num, desc=f"alfworld {split}", disable=not progress)
  if workers == 1:
    records = list(bar(map(_generate_one, jobs)))
  else:
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
      records = list(bar(pool.imap_unordered(_generate_one, jobs, chunksize=8)))
  records.sort(key=lambda r: r["index"])
  os.makedirs(os.path.dirname(manifest_path), exist_ok=True)
  with open(os.path.join(out, split, HISTOGRAMS), "w") as f:
    json.dump(histograms(records), f, indent=1)
  tmp = manifest_path + ".tmp"
  with open(tmp, "w") as f:
    json.dump({"header": header, "games": records}, f)
  os.replace(tmp, manifest_path)
  return records


def games_for(dir: str = "", split: str = "train", num: int = 8, seed: int = 0,
              workers: int | None = None) -> list[str]:  # pylint: disable=redefined-builtin
  """Game folders of a split: `dir`'s or $ALFWORLD_DATA's if they hold it, else generated.

  Args:
    dir: a game root to read ('' = $ALFWORLD_DATA's split if it has one, else generate).
    split: train, valid_seen or valid_unseen.
    num: games to take (generate).
    seed: the generation seed (generated games only).
    workers: generation processes.
  """
  official = os.environ.get("ALFWORLD_DATA")
  if dir or (official and _has_split(official, split)):
    found = games.find_games(dir or official, split)
    if not found:
      raise FileNotFoundError(f"no ALFWorld games for split {split!r} under {dir or official}")
    return found[:num]
  root = GAMES_CACHE / f"seed{seed}_{split}_{num}"
  records = generate_split(str(root), split, num, seed, workers=workers)
  return [str(root / r["path"]) for r in records]


def _has_split(root: str, split: str) -> bool:
  try:
    games.split_root(root, split)
  except FileNotFoundError:
    return False
  return True


def main(argv: Sequence[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--out", required=True, help="output root (ALFWORLD_DATA-like folder)")
  parser.add_argument("--split", required=True, choices=layouts.SPLITS)
  parser.add_argument("--num", type=int, default=None,
                      help="games to generate (default: the official split size)")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--workers", type=int, default=None, help="processes (default: all cores)")
  args = parser.parse_args(argv)
  num = OFFICIAL_SIZES[args.split] if args.num is None else args.num
  if num < 1:
    parser.error("--num must be positive")
  records = generate_split(args.out, args.split, num, args.seed, args.workers)
  print(format_histograms(args.split, histograms(records)))
  sys.stdout.flush()


if __name__ == "__main__":
  main()
