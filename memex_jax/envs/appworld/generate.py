r"""Generates AppWorld task worlds in the official layout, built by the real engine.

  python -m memex_jax.envs.appworld.generate --out DIR --num N --seed S [--splits train,...]

Writes under DIR/data: api_docs/, base_dbs/, tasks/<id>/{specs.json, dbs/} (what AppWorld itself
reads), tasks/<id>/ground_truth/{checks.json, solution.json, meta.json} (our checker and
reference solution) and datasets/<split>.txt (task ids), for N tasks per split:
- train: every task type, worlds that fit on one page of results;
- test_normal: the same mix from a separate seed stream;
- test_challenge: the multi-app types (difficulty >= 2) on large worlds (results span several
  pages: more steps).
The designs are drawn here (`tasks`); the AppWorld venv's `build.py` writes the databases.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import subprocess
import tempfile

from memex_jax.envs.appworld import env as env_lib
from memex_jax.envs.appworld import install
from memex_jax.envs.appworld import tasks as tasks_lib

SPLITS = ("train", "test_normal", "test_challenge")
# The official splits' sizes: what evaluating "the whole split" generates.
OFFICIAL_SIZES = {"train": 90, "test_normal": 168, "test_challenge": 417}
TASKS_CACHE = install.cache_dir().parent / "appworld_tasks"


def split_types(split: str) -> list[str]:
  if split not in SPLITS:
    raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
  if split == "test_challenge":
    return [t for t, (difficulty, _, _) in tasks_lib.TASK_TYPES.items() if difficulty >= 2]
  return list(tasks_lib.TASK_TYPES)


def design_split(split: str, num: int, seed: int) -> list[tasks_lib.TaskDesign]:
  """`num` task designs for a split, cycling through its task types; deterministic per seed."""
  types = split_types(split)
  prefix = split.replace("_", "")
  return [tasks_lib.design_task(f"{prefix}{seed}_{i + 1}", types[i % len(types)],
                                random.Random(f"{split}:{seed}:{i}"),
                                large=split == "test_challenge")
          for i in range(num)]


def task_folder(out: str, task_id: str) -> str:
  return os.path.join(out, "data", "tasks", task_id)


def write_designs(out: str, designs: list[tasks_lib.TaskDesign], python: str | None = None,
                  timeout_s: float = 900.0) -> None:
  """Builds the worlds in the AppWorld venv and writes each task's ground truth."""
  os.makedirs(os.path.join(out, "data"), exist_ok=True)
  python = python or str(install.ensure_installed())
  with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    json.dump([{"task_id": d.task_id, "specs": d.specs, "records": d.records} for d in designs],
              f)
  try:
    run = subprocess.run(
        [python, str(install.BUILD_SCRIPT), str(install.base_root()), f.name],
        env=install.engine_environment(pathlib.Path(out).resolve()),
        cwd=out, capture_output=True, text=True, timeout=timeout_s, check=False)
  finally:
    os.unlink(f.name)
  if run.returncode != 0:
    raise RuntimeError(f"building the AppWorld task worlds failed:\n{run.stderr[-3000:]}")
  for design in designs:
    truth = os.path.join(task_folder(out, design.task_id), "ground_truth")
    os.makedirs(truth, exist_ok=True)
    for name, value in (("checks", design.checks), ("solution", design.solution),
                        ("meta", {"task_type": design.task_type, "difficulty": design.difficulty,
                                  "apps": list(design.apps)})):
      with open(os.path.join(truth, f"{name}.json"), "w") as g:
        json.dump(value, g, indent=1)


def generate(out: str, num: int, seed: int, splits: tuple[str, ...] = SPLITS) -> dict[str, list]:
  """Writes `num` tasks per split under `out`; returns split -> task folders."""
  folders = {}
  designs = {split: design_split(split, num, seed) for split in splits}
  write_designs(out, [d for split in splits for d in designs[split]])
  datasets = os.path.join(out, "data", "datasets")
  os.makedirs(datasets, exist_ok=True)
  for split in splits:
    ids = [d.task_id for d in designs[split]]
    with open(os.path.join(datasets, f"{split}.txt"), "w") as f:
      f.write("\n".join(ids) + "\n")
    folders[split] = [task_folder(out, task_id) for task_id in ids]
  return folders


def tasks_for(dir: str = "", split: str = "train", num: int = 8, seed: int = 0,
              workers: int | None = None) -> list[str]:  # pylint: disable=redefined-builtin
  """Task folders of a split: `dir`'s (AppWorld's layout), else generated once into the cache.

  Args:
    dir: a root holding `data/datasets/<split>.txt` ('' = generate under
      `$MEMEX_JAX_CACHE/appworld_tasks/seed<seed>_<split>_<num>`).
    split: train, test_normal or test_challenge.
    num: tasks to take (generate).
    seed: the generation seed (generated tasks only).
    workers: unused: one engine process builds every world (the signature is the families').
  """
  del workers
  if dir:
    found = env_lib.dataset_tasks(dir, split)
    if not found:
      raise FileNotFoundError(f"no AppWorld tasks for split {split!r} under {dir}")
    return found[:num]
  root = TASKS_CACHE / f"seed{seed}_{split}_{num}"
  listing = root / "data" / "datasets" / f"{split}.txt"
  if listing.exists():  # written last: the worlds before it are complete
    return env_lib.dataset_tasks(str(root), split)
  return generate(str(root), num, seed, splits=(split,))[split]


def read_json(task: str, name: str):
  """A generated task's ground-truth file: checks, solution or meta."""
  with open(os.path.join(task, "ground_truth", f"{name}.json")) as f:
    return json.load(f)


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out", required=True)
  parser.add_argument("--num", type=int, required=True, help="tasks per split")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--splits", default=",".join(SPLITS))
  args = parser.parse_args(argv)
  folders = generate(args.out, args.num, args.seed, tuple(args.splits.split(",")))
  for split, tasks in folders.items():
    print(f"{split}: {len(tasks)} tasks")


if __name__ == "__main__":
  main()
