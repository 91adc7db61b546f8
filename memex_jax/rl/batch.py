"""Packing segments into the fixed-shape batch the learner step takes.

Every segment is an independent training sample (its own context, Memex section 3.3), so
several are packed into one row: segment ids keep attention inside each segment and positions
restart at 0 for each, which makes a packed forward equal to separate forwards.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import jax
import numpy as np

from memex_jax.agent.trajectory import Segment

PADDING_SEGMENT = 0  # segment id of padding tokens
PADDING_TRAJECTORY = -1  # trajectory id of padding tokens


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PackedBatch:
  """What one learner step takes; every field is [B T].

  Attributes:
    tokens: [B T] int32 token ids, 0 on padding.
    positions: [B T] int32, restarting at 0 for each packed segment, 0 on padding.
    segment_ids: [B T] int32, 1.. within a row, PADDING_SEGMENT on padding.
    loss_mask: [B T] float32, 1 on tokens the policy sampled (the trained tokens).
    rollout_logprobs: [B T] float32, the sampler's logprobs of the sampled tokens.
    old_logprobs: [B T] float32, the learner's logprobs at the start of the iteration.
    ref_logprobs: [B T] float32, the frozen reference model's logprobs.
    advantages: [B T] float32, the advantage of the token's trajectory.
    trajectory_ids: [B T] int32, PADDING_TRAJECTORY on padding.
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

  def replace(self, **changes: Any) -> "PackedBatch":
    return dataclasses.replace(self, **changes)

  @property
  def shape(self) -> tuple[int, int]:
    return tuple(self.tokens.shape)


@dataclasses.dataclass(frozen=True)
class PackStats:
  """What packing did with the segments it was given; nothing is cut or dropped unreported.

  Attributes:
    num_segments: segments given.
    num_packed: segments placed in the batch.
    num_truncated: packed segments longer than seq_len, cut to their first seq_len tokens.
    truncated_tokens: tokens removed by those cuts.
    truncated_loss_tokens: trained tokens among them.
    num_without_advantage: segments skipped because `advantages` has no entry for their
      trajectory (its group was filtered out for having no signal).
    leftovers: segments that did not fit in the B rows, in their original order; pack them
      into the next batch.
    rows_used: rows holding at least one segment.
    loss_tokens: trained tokens in the batch.
    fill: fraction of the B x T slots holding a token.
  """

  num_segments: int
  num_packed: int
  num_truncated: int
  truncated_tokens: int
  truncated_loss_tokens: int
  num_without_advantage: int
  leftovers: tuple[Segment, ...]
  rows_used: int
  loss_tokens: int
  fill: float

  def as_dict(self) -> dict[str, float]:
    """The counters, for metrics (leftovers as a count)."""
    out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "leftovers"}
    out["num_leftover"] = len(self.leftovers)
    return out


def empty_batch(batch_size: int, seq_len: int) -> PackedBatch:
  """An all-padding numpy batch of shape [batch_size, seq_len]."""
  ints = lambda fill: np.full((batch_size, seq_len), fill, np.int32)
  floats = lambda: np.zeros((batch_size, seq_len), np.float32)
  return PackedBatch(
      tokens=ints(0), positions=ints(0), segment_ids=ints(PADDING_SEGMENT), loss_mask=floats(),
      rollout_logprobs=floats(), old_logprobs=floats(), ref_logprobs=floats(),
      advantages=floats(), trajectory_ids=ints(PADDING_TRAJECTORY))


def _check_segment(segment: Segment) -> None:
  n = len(segment.token_ids)
  if n == 0:
    raise ValueError(f"segment {segment.segment_index} of trajectory {segment.trajectory_id} "
                     "has no tokens")
  for name in ("loss_mask", "rollout_logprobs"):
    if len(getattr(segment, name)) != n:
      raise ValueError(
          f"segment {segment.segment_index} of trajectory {segment.trajectory_id}: {name} has "
          f"{len(getattr(segment, name))} entries for {n} token_ids")


def pack_segments(segments: Sequence[Segment], advantages: Mapping[int, float] | None,
                  batch_size: int, seq_len: int) -> tuple[PackedBatch, PackStats]:
  """First-fit packs segments, in order, into a [batch_size, seq_len] numpy batch.

  Each segment goes into the first row with room for it. The first token of a segment has no
  prediction (nothing precedes it), so its loss mask is cleared. old/ref logprobs are zeros
  until the learner fills them.

  Args:
    segments: the segments to pack.
    advantages: trajectory id -> advantage; segments of trajectories missing from it are
      skipped and counted. None packs every segment with advantage 0 (SFT).
    batch_size: B rows.
    seq_len: T tokens per row; longer segments are cut to their first T tokens (the kept
      tokens keep their true prefix) and counted.

  Returns:
    (batch, stats); segments that did not fit are in `stats.leftovers`.
  """
  if batch_size <= 0 or seq_len <= 1:
    raise ValueError(f"pack_segments needs batch_size >= 1 and seq_len >= 2, got "
                     f"batch_size={batch_size}, seq_len={seq_len}")
  batch = empty_batch(batch_size, seq_len)
  used = np.zeros(batch_size, np.int64)  # tokens filled per row
  count = np.zeros(batch_size, np.int32)  # segments per row
  num_packed = num_truncated = truncated_tokens = truncated_loss = without_advantage = 0
  leftovers = []
  for segment in segments:
    _check_segment(segment)
    if advantages is None:
      advantage = 0.0
    elif segment.trajectory_id in advantages:
      advantage = float(advantages[segment.trajectory_id])
    else:
      without_advantage += 1
      continue
    n = min(len(segment.token_ids), seq_len)
    fits = np.flatnonzero(used + n <= seq_len)
    if not fits.size:
      leftovers.append(segment)
      continue
    if n < len(segment.token_ids):
      num_truncated += 1
      truncated_tokens += len(segment.token_ids) - n
      truncated_loss += int(np.sum(np.asarray(segment.loss_mask)[n:] != 0))
    row, start = fits[0], used[fits[0]]
    span = slice(start, start + n)
    count[row] += 1
    batch.tokens[row, span] = np.asarray(segment.token_ids[:n])
    batch.positions[row, span] = np.arange(n)
    batch.segment_ids[row, span] = count[row]
    mask = (np.asarray(segment.loss_mask[:n]) != 0).astype(np.float32)
    mask[0] = 0.0
    batch.loss_mask[row, span] = mask
    batch.rollout_logprobs[row, span] = np.asarray(segment.rollout_logprobs[:n], np.float32)
    batch.advantages[row, span] = advantage
    batch.trajectory_ids[row, span] = segment.trajectory_id
    used[row] += n
    num_packed += 1
  stats = PackStats(
      num_segments=len(segments), num_packed=num_packed, num_truncated=num_truncated,
      truncated_tokens=truncated_tokens, truncated_loss_tokens=truncated_loss,
      num_without_advantage=without_advantage, leftovers=tuple(leftovers),
      rows_used=int(np.sum(count > 0)), loss_tokens=int(batch.loss_mask.sum()),
      fill=float(used.sum() / (batch_size * seq_len)))
  return batch, stats
