"""Packing samples into the fixed-shape minibatches the learner step takes.

Every sample (a Memex segment: its own context, section 3.3) is independent, so several are
packed into one row: segment ids keep attention inside each sample and positions restart at 0
for each, which makes a packed forward equal to separate forwards. Every sample given is packed:
the batch has as many [rows, T] minibatches as the samples need, so the learner step compiles
once for its minibatch shape and the iteration trains on everything that was generated.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Sequence

import jax
import numpy as np

from memex_jax.rl.sample import Sample

PADDING_SEGMENT = 0  # segment id of padding tokens (packed samples are numbered from 1)
PADDING_TRAJECTORY = -1  # trajectory id of padding tokens


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PackedBatch:
  """What the learner takes; every field is [B T] (a minibatch, or the iteration's minibatches
  stacked along B).

  Attributes:
    tokens: [B T] int32 token ids, 0 on padding.
    positions: [B T] int32, restarting at 0 for each packed sample, 0 on padding.
    segment_ids: [B T] int32, the packed samples of a row numbered 1.., PADDING_SEGMENT on
      padding.
    loss_mask: [B T] float32, 1 on tokens the policy sampled (the trained tokens), or the
      sample's own weight of a token (SFT); 0 elsewhere.
    rollout_logprobs: [B T] float32, the sampler's logprobs of the sampled tokens.
    old_logprobs: [B T] float32, the learner's logprobs at the start of the iteration.
    ref_logprobs: [B T] float32, the frozen reference model's logprobs.
    advantages: [B T] float32, the advantage of the token's trajectory.
    trajectory_ids: [B T] int32, PADDING_TRAJECTORY on padding.
    old_values: [B T] float32, the critic's values at the start of the iteration (PPO with a
      value head; None or zeros otherwise). Like logprobs, entry t belongs to token t: the
      value of the state that token t was sampled from.
    returns: [B T] float32, the critic's targets (GAE advantage + old value; PPO only).
  """

  tokens: Any
  positions: Any
  segment_ids: Any
  loss_mask: Any
  rollout_logprobs: Any
  old_logprobs: Any
  ref_logprobs: Any
  advantages: Any
  trajectory_ids: Any
  old_values: Any = None
  returns: Any = None

  def replace(self, **changes: Any) -> "PackedBatch":
    return dataclasses.replace(self, **changes)

  @property
  def shape(self) -> tuple[int, int]:
    return tuple(self.tokens.shape)


@dataclasses.dataclass(frozen=True)
class PackStats:
  """What packing did with the samples it was given; nothing is cut or left out unreported.

  Attributes:
    num_samples: samples given.
    num_packed: samples placed in the batch (all but those without an advantage).
    num_truncated: packed samples longer than seq_len, cut to their first seq_len tokens.
    truncated_tokens: tokens removed by those cuts.
    truncated_loss_tokens: trained tokens among them.
    num_without_advantage: samples skipped because `advantages` has no entry for their
      trajectory (its group was filtered out for having no signal).
    num_minibatches: [rows, T] minibatches the batch holds.
    rows_used: rows holding at least one sample.
    loss_tokens: trained tokens in the batch.
    fill: fraction of the batch's B x T slots holding a token.
  """

  num_samples: int
  num_packed: int
  num_truncated: int
  truncated_tokens: int
  truncated_loss_tokens: int
  num_without_advantage: int
  num_minibatches: int
  rows_used: int
  loss_tokens: int
  fill: float

  def as_dict(self) -> dict[str, float]:
    return dataclasses.asdict(self)


def empty_batch(batch_size: int, seq_len: int) -> PackedBatch:
  """An all-padding numpy batch of shape [batch_size, seq_len]."""
  ints = lambda fill: np.full((batch_size, seq_len), fill, np.int32)
  floats = lambda: np.zeros((batch_size, seq_len), np.float32)
  return PackedBatch(
      tokens=ints(0), positions=ints(0), segment_ids=ints(PADDING_SEGMENT), loss_mask=floats(),
      rollout_logprobs=floats(), old_logprobs=floats(), ref_logprobs=floats(),
      advantages=floats(), trajectory_ids=ints(PADDING_TRAJECTORY), old_values=floats(),
      returns=floats())


def _first_fit(lengths: Sequence[int], seq_len: int) -> tuple[list[int], list[int], int]:
  """(row, start) of each length placed first-fit into as many rows of seq_len as needed, and
  the number of rows."""
  used: list[int] = []
  rows, starts = [], []
  for n in lengths:
    row = next((r for r, u in enumerate(used) if u + n <= seq_len), len(used))
    if row == len(used):
      used.append(0)
    rows.append(row)
    starts.append(used[row])
    used[row] += n
  return rows, starts, len(used)


def pack_samples(samples: Sequence[Sample], advantages: Mapping[int, float] | None,
                 minibatch_rows: int, seq_len: int) -> tuple[PackedBatch, PackStats]:
  """First-fit packs every sample, in order, into a [k * minibatch_rows, seq_len] numpy batch.

  Each sample goes into the first row with room for it; k is the fewest minibatches whose rows
  hold them all (at least 1), so minibatch i is rows [i * minibatch_rows, (i + 1) *
  minibatch_rows). The first token of a sample has no prediction (nothing precedes it), so its
  loss mask is cleared. old/ref logprobs are zeros until the learner fills them.

  Args:
    samples: the samples to pack.
    advantages: trajectory id -> advantage; samples of trajectories missing from it are
      skipped and counted. None packs every sample with advantage 0 (SFT).
    minibatch_rows: rows of one learner step.
    seq_len: T tokens per row; longer samples are cut to their first T tokens (the kept
      tokens keep their true prefix) and counted.

  Returns:
    (batch, stats).
  """
  if minibatch_rows <= 0 or seq_len <= 1:
    raise ValueError(f"pack_samples needs minibatch_rows >= 1 and seq_len >= 2, got "
                     f"minibatch_rows={minibatch_rows}, seq_len={seq_len}")
  kept, without_advantage = [], 0
  for sample in samples:
    sample.check()
    if advantages is None or sample.trajectory_id in advantages:
      kept.append(sample)
    else:
      without_advantage += 1
  lengths = [min(len(s.token_ids), seq_len) for s in kept]
  rows, starts, rows_used = _first_fit(lengths, seq_len)
  num_minibatches = max(1, -(-rows_used // minibatch_rows))
  batch = empty_batch(num_minibatches * minibatch_rows, seq_len)
  count = np.zeros(batch.shape[0], np.int32)  # samples per row
  num_truncated = truncated_tokens = truncated_loss = 0
  for sample, n, row, start in zip(kept, lengths, rows, starts):
    if n < len(sample.token_ids):
      num_truncated += 1
      truncated_tokens += len(sample.token_ids) - n
      truncated_loss += int(np.sum(np.asarray(sample.loss_mask)[n:] != 0))
    span = slice(start, start + n)
    count[row] += 1
    batch.tokens[row, span] = np.asarray(sample.token_ids[:n])
    batch.positions[row, span] = np.arange(n)
    batch.segment_ids[row, span] = count[row]
    mask = np.asarray(sample.loss_mask[:n], np.float32)
    mask[0] = 0.0
    batch.loss_mask[row, span] = mask
    batch.rollout_logprobs[row, span] = np.asarray(sample.rollout_logprobs[:n], np.float32)
    batch.advantages[row, span] = 0.0 if advantages is None else advantages[sample.trajectory_id]
    batch.trajectory_ids[row, span] = sample.trajectory_id
  stats = PackStats(
      num_samples=len(samples), num_packed=len(kept), num_truncated=num_truncated,
      truncated_tokens=truncated_tokens, truncated_loss_tokens=truncated_loss,
      num_without_advantage=without_advantage, num_minibatches=num_minibatches,
      rows_used=rows_used, loss_tokens=int(np.count_nonzero(batch.loss_mask)),
      fill=float(sum(lengths) / batch.tokens.size))
  return batch, stats


def take_rows(batch: PackedBatch, rows: Any) -> PackedBatch:
  """The batch's `rows` (a slice or index array), every field alike."""
  return jax.tree.map(lambda x: x[rows], batch)


def map_minibatches(fn: Callable[[PackedBatch], PackedBatch], batch: PackedBatch,
                    minibatch_rows: int) -> PackedBatch:
  """`fn` over each [minibatch_rows, T] minibatch in order, reassembled on the host.

  One compiled shape serves however many minibatches an iteration packed (e.g. filling old and
  reference logprobs).
  """
  b = batch.shape[0]
  if b % minibatch_rows:
    raise ValueError(f"map_minibatches: {b} rows are not whole minibatches of {minibatch_rows}")
  parts = [jax.device_get(fn(take_rows(batch, slice(i, i + minibatch_rows))))
           for i in range(0, b, minibatch_rows)]
  return jax.tree.map(lambda *xs: np.concatenate([np.asarray(x) for x in xs]), *parts)
