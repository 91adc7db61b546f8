"""Multi-turn batched sampling with persistent KV slots (the JAX implementation of `Policy`).

Each live episode owns one row ("slot") of a fixed-size KV cache. A turn prefills only the ids
that arrived since the episode's last turn and decodes; the history is never re-prefilled, the
rows with no new ids are left out of the prefill, and the rows with no turn going out of the
decode; both attend over the slots their rows fill (a power of two), not the whole window.
A long new context is prefilled in pieces (`prefill_chunk`), so the short ones beside it in the
same call stop after the first piece.
`generate` decodes whole turns; `advance` decodes them in chunks and returns those that ended,
so turns start and end while others are being written (the agent loop's streaming mode). When
an episode's context is reset (after a compression), its slot keeps the longest cached prefix
the new context shares (the [system, task] head) and prefills the rest. Finished episodes free
their slot for waiting ones, so batches never shrink. A head that the new contexts of one call
share (every episode's system prompt) is prefilled once and copied into their rows (prefix.py).

On a device mesh the slots are split over its batch axes and decoded data-parallel
(sharded.py); the params keep the training layout, so the learner's params are used where
they lie, without a copy.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Callable, Collection, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from memex_jax import parallel
from memex_jax.agent.policy import Turn, TurnRequest
from memex_jax.models import transformer
from memex_jax.models.config import ModelConfig
from memex_jax.sampling import decode
from memex_jax.sampling.config import SamplerConfig, SamplerStats
from memex_jax.sampling import prefix as prefix_lib
from memex_jax.sampling import sharded
from memex_jax.sampling import stops as stops_lib
from memex_jax.tokenizers import Tokenizer

def _bucket(n: int, size: int) -> int:
  return max(size, -(-n // size) * size)


@dataclasses.dataclass
class _Writing:
  """A turn cut into chunks: what it sampled so far and how many ids it may still sample."""

  ids: list[int]
  logprobs: list[float]
  left: int


@dataclasses.dataclass
class _Slot:
  cached: list[int] = dataclasses.field(default_factory=list)  # ids whose K/V sit in the cache
  pending: list[int] = dataclasses.field(default_factory=list)  # sampled last, not yet cached
  episode: int | None = None
  writing: _Writing | None = None  # the episode's unfinished turn (`advance`)


class Sampler:
  """Implements `memex_jax.agent.policy.Policy` with the JAX model."""

  def __init__(self, model_cfg: ModelConfig, params: dict, tokenizer: Tokenizer,
               config: SamplerConfig = SamplerConfig(), mesh: Mesh | None = None):
    """Builds the stop table and the KV cache.

    Args:
      model_cfg: the served model (e.g. the int4 serving view of a QAT model).
      params: its params; assigning `sampler.params` later swaps them (placed on the mesh).
      tokenizer: must match `model_cfg.vocab_size`.
      config: decoding settings.
      mesh: decode on this mesh (`config.num_slots` must split over its batch axes); None runs
        on the default device.

    Raises:
      ValueError: (one line) the tokenizer does not fit the model, or the slots do not split.
    """
    # A one-device mesh decodes as no mesh: the mesh path computes every row and slot.
    mesh = None if mesh is None or mesh.devices.size == 1 else mesh
    self.model_cfg, self.tokenizer, self.config, self.mesh = model_cfg, tokenizer, config, mesh
    tokenizer.check_matches(model_cfg.vocab_size, "sampler model config")
    strings = [tokenizer.decode([i]) for i in range(tokenizer.vocab_size)]
    strings += [""] * (model_cfg.vocab_size - len(strings))
    eos = [] if tokenizer.eos_id is None else [tokenizer.eos_id]
    self.table = stops_lib.build_stop_table(strings, list(config.stop_strings), eos)
    self.cache = transformer.init_cache(model_cfg, config.num_slots, config.cache_length)
    self._params_shardings = None
    self._prefill: Callable[..., tuple[transformer.KVCache, jax.Array]] = functools.partial(
        decode.prefill_jit, model_cfg)
    self._sharded_steps: dict[int, Callable[..., decode.DecodeOutput]] = {}
    if mesh is not None:
      parallel.check_batch_size(config.num_slots, mesh, name="sampler num_slots")
      self._params_shardings = parallel.param_shardings(model_cfg, mesh)
      self.cache = jax.device_put(self.cache, sharded.cache_sharding(mesh))
      self._prefill = sharded.shard_prefill(model_cfg, mesh, self._params_shardings)
    self.slots = [_Slot() for _ in range(config.num_slots)]
    self.shared: prefix_lib.SharedPrefix | None = None
    self.params = params
    self.rng = jax.random.PRNGKey(config.seed)
    self.stats = SamplerStats()
    # Device state of the turns cut into chunks: next-id logits [n V] and stop bytes [n W].
    self._carry: tuple[jax.Array, jax.Array] | None = None

  @property
  def params(self) -> dict:
    return self._params

  @params.setter
  def params(self, params: dict) -> None:
    """Swaps the params. K/V cached under the old ones is dropped, except a live episode's own."""
    if self._params_shardings is not None:
      params = jax.device_put(params, self._params_shardings)
    self._params = params
    # K/V cached under the old params (the shared prefix, free slots) must not be reused.
    self.drop_cached_prefixes()

  def drop_cached_prefixes(self) -> None:
    """Forgets the shared prefix and the ids cached in free slots, so the next prompts prefill
    from their start.

    Needed after a params swap; also makes a turn's numbers independent of what the sampler
    decoded before (a resumed run decodes bit for bit as the uninterrupted one).
    """
    self.shared = None
    for slot in getattr(self, "slots", ()):
      if slot.episode is None:
        slot.cached, slot.pending = [], []

  # -- slot bookkeeping (host side) --

  def _slot_of(self, episode: int) -> int | None:
    return next((i for i, s in enumerate(self.slots) if s.episode == episode), None)

  def _claim(self, request: TurnRequest) -> int:
    free = [i for i, s in enumerate(self.slots) if s.episode is None]
    if not free:
      raise RuntimeError(f"no free KV slot for episode {request.episode_id}: all "
                         f"{len(self.slots)} slots are live; release finished episodes first")
    # Prefer the free slot that already caches the longest prefix of this context.
    best = max(free, key=lambda i: prefix_lib.common_length(self.slots[i].cached, request.new_ids))
    self.slots[best].episode = request.episode_id
    return best

  def release(self, episode_id: int) -> None:
    slot = self._slot_of(episode_id)
    if slot is not None:
      self.slots[slot].episode = None  # its cached ids stay reusable as a prefix
      self.slots[slot].writing = None  # an unfinished turn is dropped (its fed ids are cached)

  def _cached_length(self, slot: _Slot, ids: Sequence[int]) -> tuple[int, int]:
    """(ids of `ids` cached in the slot's row, in the shared prefix)."""
    shared = 0 if self.shared is None else prefix_lib.common_length(self.shared.ids, ids)
    return prefix_lib.common_length(slot.cached, ids), shared

  def _share_head(self, resets: Sequence[tuple[int, TurnRequest]]) -> None:
    """Prefills the head the new contexts share into `self.shared`, when that saves prefill."""
    cfg = self.config
    head = min(prefix_lib.shared_head([r.new_ids for _, r in resets]), cfg.cache_length - 1)
    if len(resets) < 2 or head < cfg.prompt_bucket:
      return
    # Prefilling the head once must cost less than what the rows would prefill of it otherwise.
    missing = sum(head - min(head, max(self._cached_length(self.slots[i], r.new_ids)))
                  for i, r in resets)
    if missing <= head:
      return
    ids = resets[0][1].new_ids[:head]
    self.shared = prefix_lib.prefill(self.model_cfg, self.params, ids,
                                     min(_bucket(head, cfg.prompt_bucket), cfg.cache_length))
    self.stats.prefix_tokens += head

  def _rows_to_compute(self, rows: Collection[int]) -> np.ndarray:
    """The cache rows a prefill or decode computes: `rows` (those with work) and idle ones up to
    the next power of two (few compiles), or every row (on a mesh, whose split needs them all)."""
    n = self.config.num_slots
    size = n if self.mesh is not None else min(n, 1 << (len(rows) - 1).bit_length())
    if size == n:
      return np.arange(n)
    idle = [i for i in range(n) if i not in rows]
    return np.asarray(sorted(rows) + idle[:size - len(rows)], np.int32)

  def _decode_call(self, take: np.ndarray, needed: int,
                   new_tokens: int) -> Callable[..., decode.DecodeOutput]:
    """The decode of rows `take` whose writes reach slot `needed` - 1 (one compile per bucket):
    over `_attended_slots(needed)` off a mesh, over every row and slot on one."""
    if self.mesh is not None:
      if new_tokens not in self._sharded_steps:
        self._sharded_steps[new_tokens] = sharded.shard_decode_steps(
            self.model_cfg, self.mesh, self._params_shardings, new_tokens)
      return self._sharded_steps[new_tokens]
    return functools.partial(decode.decode_rows_jit, self.model_cfg, rows=jnp.asarray(take),
                             slots=self._attended_slots(needed), max_new_tokens=new_tokens)

  def _attended_slots(self, needed: int) -> int:
    """The slots a call off a mesh attends over when its rows reach slot `needed` - 1: `needed`
    rounded up to a power of two, or the whole window from three quarters of it (one compile
    fewer per row count)."""
    slots, window = 1 << (needed - 1).bit_length(), self.config.cache_length
    return window if 4 * slots > 3 * window else slots

  def _prefill_pieces(self, rows: dict[int, tuple[int, list[int], int]]) -> jax.Array:
    """Writes each row's new ids into its cache slots, `config.prefill_chunk` ids of every row
    per call; returns the logits [B V] of each row's last id (zeros at the other rows).

    Pieces keep the compiled prompt widths few, and the rows with a short new context (an
    observation) stop paying for a long one (a reset) after the first piece.
    """
    cfg, n = self.config, self.config.num_slots
    lengths = {i: len(ids) for i, (_, ids, _) in rows.items()}
    piece = cfg.prefill_chunk or max(lengths.values())
    # A row that pads a piece writes there from where its context ends: its next ids overwrite
    # that K/V before any query attends to it.
    end = np.asarray([len(s.cached) for s in self.slots], np.int32)
    for i, (start, ids, _) in rows.items():
      end[i] = start + len(ids)
    logits = None
    for offset in range(0, max(lengths.values()), piece):
      part = {i: ids[offset:offset + piece] for i, (_, ids, _) in rows.items()
              if lengths[i] > offset}
      take = self._rows_to_compute(part)
      prompt = np.zeros((len(take), _bucket(max(map(len, part.values())), cfg.prompt_bucket)),
                        np.int32)
      start, length = end[take], np.zeros((len(take),), np.int32)
      for j, i in enumerate(take):
        if i in part:
          prompt[j, :len(part[i])] = part[i]
          start[j], length[j] = rows[i][0] + offset, len(part[i])
      args = (jnp.asarray(prompt), jnp.asarray(start), jnp.asarray(length))
      slots = self._attended_slots(int(np.max((start + length)[length > 0])))
      if self.mesh is not None or (len(take) == n and slots == cfg.cache_length):
        self.cache, got = self._prefill(self.params, self.cache, *args)
      else:
        self.cache, got = decode.prefill_rows_jit(self.model_cfg, self.params, self.cache,
                                                  jnp.asarray(take), *args, slots=slots)
      ends_here = np.zeros((n, 1), bool)
      ends_here[[i for i in part if lengths[i] <= offset + piece]] = True
      logits = got if logits is None else jnp.where(ends_here, got, logits)
    return logits

  def _plan(self, slot: _Slot, request: TurnRequest) -> tuple[int, list[int], bool]:
    """(start position, ids to prefill, whether the row takes the shared prefix) for one
    request; updates the slot's cached ids."""
    if not request.reset:
      return len(slot.cached), slot.pending + list(request.new_ids), False
    ids = list(request.new_ids)
    own, shared = self._cached_length(slot, ids)
    keep = min(max(own, shared), len(ids) - 1)  # re-feed >= 1 id for logits
    slot.cached, slot.pending = ids[:keep], []
    self.stats.reused_tokens += keep
    return keep, ids[keep:], shared > own and keep > own

  # -- the Policy interface --

  def generate(self, requests: Sequence[TurnRequest], temperature: float | None = None,
               top_p: float | None = None) -> list[Turn]:
    """One whole turn per request; `temperature` and `top_p` override the config's for this
    call.

    Raises:
      RuntimeError: turns started by `advance` are unfinished.
    """
    if any(slot.writing is not None for slot in self.slots):
      raise RuntimeError("turns started by `advance` are unfinished; advance them to their end")
    turns = self._decode(requests, 0, temperature, top_p)
    return [turns[r.episode_id] for r in requests]

  def advance(self, requests: Sequence[TurnRequest]) -> dict[int, Turn]:
    """Starts a turn per request and decodes every unfinished turn by up to
    `config.chunk_tokens` ids; returns the turns that ended, by episode id.

    A turn started here ends in this call or a later one; a call with no request and no
    unfinished turn returns {}.

    Raises:
      ValueError: a request for an episode whose turn is unfinished.
    """
    busy = [r.episode_id for r in requests if (i := self._slot_of(r.episode_id)) is not None
            and self.slots[i].writing is not None]
    if busy:
      raise ValueError(f"episodes {busy} asked for a turn before their last one ended")
    return self._decode(requests, self.config.chunk_tokens, None, None)

  def _decode(self, requests: Sequence[TurnRequest], chunk: int, temperature: float | None,
              top_p: float | None) -> dict[int, Turn]:
    """Prefills the requests' new ids, decodes them and the unfinished turns by up to `chunk`
    ids (0: to their ends); the turns that ended, by episode id."""
    cfg = self.config
    temperature = cfg.temperature if temperature is None else temperature
    top_p = cfg.top_p if top_p is None else top_p
    placed: list[tuple[int, TurnRequest]] = []
    for r in requests:
      if r.reset and not r.new_ids:
        raise ValueError(f"episode {r.episode_id}: a reset needs a non-empty context")
      slot_index = self._slot_of(r.episode_id)
      if slot_index is None:
        if not r.reset:
          raise ValueError(f"episode {r.episode_id} has no slot; its first request must reset")
        slot_index = self._claim(r)
      placed.append((slot_index, r))
    if cfg.share_prefix:
      began = time.perf_counter()
      self._share_head([(i, r) for i, r in placed if r.reset])
      self.stats.prefill_s += time.perf_counter() - began
    rows: dict[int, tuple[int, list[int], int]] = {}
    copy_rows = np.full((cfg.num_slots,), cfg.num_slots, np.int32)  # num_slots = no copy
    for slot_index, r in placed:
      start, ids, copies = self._plan(self.slots[slot_index], r)
      if copies:
        copy_rows[slot_index] = slot_index
      room = cfg.cache_length - start - len(ids)
      if room < 1:
        raise ValueError(f"episode {r.episode_id}: context of {start + len(ids)} ids leaves no "
                         f"room in the {cfg.cache_length}-slot cache")
      budget = min(r.max_new_tokens, room)
      self.slots[slot_index].writing = _Writing([], [], budget)
      rows[slot_index] = (start, ids, budget)
    going = {i: (len(s.cached), [], s.writing.left) for i, s in enumerate(self.slots)
             if s.writing is not None and i not in rows}
    if not rows and not going:
      return {}

    n = cfg.num_slots
    longest = max(m for _, _, m in list(rows.values()) + list(going.values()))
    new_len = _bucket(longest, cfg.new_tokens_bucket)
    new_len = min(new_len, chunk) if chunk else new_len  # one compile for the chunks
    start = np.asarray([len(s.cached) for s in self.slots], np.int32)
    length = np.zeros((n,), np.int32)
    max_tokens = np.zeros((n,), np.int32)
    for i, (row_start, ids, m) in {**going, **rows}.items():
      start[i], length[i], max_tokens[i] = row_start, len(ids), m
    began = time.perf_counter()
    logits = window = None
    if rows:
      if (copy_rows < n).any():
        self.cache = prefix_lib.copy(self.cache, self.shared.cache, jnp.asarray(copy_rows))
        if self.mesh is not None:  # the copy may leave the cache in another layout
          self.cache = jax.device_put(self.cache, sharded.cache_sharding(self.mesh))
      logits = self._prefill_pieces(rows)
      window = stops_lib.empty_window(self.table, n)
      jax.block_until_ready(logits)
    if going:  # the unfinished turns go on from their carried state
      carried = np.zeros((n,), bool)
      carried[list(going)] = True
      if logits is None:
        logits, window = self._carry
      else:
        logits = jnp.where(carried[:, None], self._carry[0], logits.astype(jnp.float32))
        window = jnp.where(carried[:, None], self._carry[1], window)
    prefilled = time.perf_counter()
    self.rng, key = jax.random.split(self.rng)
    active = np.zeros((n,), bool)
    active[list(rows) + list(going)] = True
    live = active.nonzero()[0]
    decode_call = self._decode_call(self._rows_to_compute(live.tolist()),
                                    int((start + length)[live].max()) + new_len, new_len)
    out = decode_call(
        self.params, self.cache, logits, window, self.table, jnp.asarray(start + length),
        jnp.asarray(active), jnp.asarray(max_tokens), key, jnp.float32(temperature),
        jnp.float32(top_p))
    self.cache = out.cache
    tokens, logprobs, counts, done = jax.device_get((out.tokens, out.logprobs, out.num_tokens,
                                                     out.done))
    self._carry = (out.logits, out.window)
    stats = self.stats
    stats.calls += 1
    stats.prefill_tokens += int(length.sum())
    stats.generated_tokens += int(counts.sum())
    stats.prefill_s += prefilled - began
    stats.decode_s += time.perf_counter() - prefilled

    ended = {}
    for i, (_, ids, _) in {**going, **rows}.items():
      slot, count = self.slots[i], int(counts[i])
      sampled = [int(t) for t in tokens[i, :count]]
      writing = slot.writing
      writing.ids += sampled
      writing.logprobs += [float(x) for x in logprobs[i, :count]]
      writing.left -= count
      if done[i]:  # the turn's last id is not fed: the next turn's prefill writes it
        slot.cached, slot.pending = slot.cached + ids + sampled[:-1], sampled[-1:]
        ended[slot.episode] = Turn(ids=tuple(writing.ids), logprobs=tuple(writing.logprobs))
        slot.writing = None
      else:
        slot.cached, slot.pending = slot.cached + ids + sampled, []
    return ended
