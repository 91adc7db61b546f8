"""The whole batched generation (prefill + decode loop) as one pure, jittable function."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from memex_jax.models import transformer
from memex_jax.models.config import ModelConfig
from memex_jax.sampling import stops as stops_lib

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class DecodeOutput:
  """Result of one decode call.

  Attributes:
    cache: the updated KV cache.
    tokens: [B N] int32 sampled ids (valid up to `num_tokens`).
    logprobs: [B N] float32 log_softmax(logits / temperature) of each sampled id, before top-p.
    num_tokens: [B] int32 sampled per row.
    done: [B] bool the row's turn ended (a stop, its `max_tokens`, or it was idle); False for a
      row cut by the call's `max_new_tokens`, whose turn goes on in a later call.
    logits: [B V] float32 where not `done`: the next id's logits (the row's last id was fed).
    window: [B W] uint8 where not `done`: the row's stop-matching bytes so far.
  """

  cache: transformer.KVCache
  tokens: Array
  logprobs: Array
  num_tokens: Array
  done: Array
  logits: Array
  window: Array


jax.tree_util.register_dataclass(
    DecodeOutput,
    data_fields=["cache", "tokens", "logprobs", "num_tokens", "done", "logits", "window"],
    meta_fields=[])


def _nucleus(logp: Array, top_p: Array) -> Array:
  """logp [B V] with every id outside the top-p mass set to -inf (one full-vocab sort)."""
  order = jnp.argsort(-logp, axis=-1)
  sorted_logp = jnp.take_along_axis(logp, order, axis=-1)
  mass_before = jnp.cumsum(jnp.exp(sorted_logp), axis=-1) - jnp.exp(sorted_logp)
  keep_sorted = mass_before < top_p  # always keeps the top token
  keep = jnp.zeros_like(keep_sorted).at[jnp.arange(logp.shape[0])[:, None], order].set(keep_sorted)
  return jnp.where(keep, logp, -jnp.inf)


def sample_token(logits: Array, rng: Array, temperature: Array,
                 top_p: Array) -> tuple[Array, Array]:
  """logits [B V] -> (ids [B], logprobs [B]); temperature <= 0 means greedy.

  The returned logprob is log_softmax(logits / T)[id] before the top-p cut (T = 1 when greedy),
  the same definition the learner uses. The sort of the top-p cut runs only when top_p < 1 and
  the random draw only when sampling: both are per-step full-vocab work.
  """
  greedy = temperature <= 0
  t = jnp.where(greedy, 1.0, temperature)
  logp = jax.nn.log_softmax(logits.astype(jnp.float32) / t, axis=-1)  # B V

  def draw(logp):
    allowed = jax.lax.cond(top_p < 1, _nucleus, lambda x, _: x, logp, top_p)
    return jax.random.categorical(rng, allowed, axis=-1)

  ids = jax.lax.cond(greedy, lambda x: jnp.argmax(x, axis=-1), draw, logp).astype(jnp.int32)
  return ids, jnp.take_along_axis(logp, ids[:, None], axis=-1)[:, 0]


def prefill(cfg: ModelConfig, params: dict, cache: transformer.KVCache, prompt: Array,
            start: Array, prompt_length: Array) -> tuple[transformer.KVCache, Array]:
  """Writes each row's new ids into its cache slots; returns (cache, logits [B V] of its last id).

  Args: as `generate`'s. Rows with prompt_length 0 get the logits of their pad id (unused).
  """
  model = transformer.Transformer(cfg)
  p = prompt.shape[1]
  positions = start[:, None] + jnp.arange(p, dtype=jnp.int32)[None]  # B P
  hidden, cache = model.apply({"params": params}, prompt, positions, cache, return_hidden=True)
  last = jnp.take_along_axis(hidden, jnp.maximum(prompt_length - 1, 0)[:, None, None], axis=1)[:, 0]
  return cache, transformer.logits_from_hidden(last, transformer.head_kernel(params, cfg))


def prefill_rows(cfg: ModelConfig, params: dict, cache: transformer.KVCache, rows: Array,
                 prompt: Array, start: Array, prompt_length: Array, slots: int | None = None
                 ) -> tuple[transformer.KVCache, Array]:
  """`prefill` of the cache rows `rows` over their first `slots` slots only: the other rows and
  slots are neither computed nor changed.

  A streaming call has new ids in a few of its rows; prefilling every row to the longest new
  context would spend the compute of the idle ones on padding. Its queries attend over every slot
  they are given, so an observation after a compression (a short context in a long window)
  would pay for the whole window.

  Args:
    rows: [R] int32 distinct cache rows.
    prompt, start, prompt_length: [R P], [R], [R] as `prefill`'s, for those rows.
    slots: (static) at least every row's start + prompt_length (None: the cache's); a padded or
      idle row's writes past it are dropped.
  Returns:
    (cache, logits [B V]): the rows' next-id logits at `rows`, zeros elsewhere.
  """
  part = jax.tree.map(lambda c: c[:, rows, :slots], cache)  # L R slots K Dh
  part, logits = prefill(cfg, params, part, prompt, start, prompt_length)
  cache = jax.tree.map(lambda c, p: c.at[:, rows, :slots].set(p), cache, part)
  b = jax.tree.leaves(cache)[0].shape[1]
  return cache, jnp.zeros((b, logits.shape[-1]), logits.dtype).at[rows].set(logits)


def decode_steps(cfg: ModelConfig, params: dict, cache: transformer.KVCache, logits: Array,
                 window: Array, table: stops_lib.StopTable, position: Array, active: Array,
                 max_tokens: Array, rng: Array, temperature: Array, top_p: Array,
                 max_new_tokens: int, decode_layout: bool | None = None) -> DecodeOutput:
  """Samples from `logits` [B V] and feeds each sampled id back, at most `max_new_tokens` ids.

  A row's turn ends on a stop or at its `max_tokens`; its last id is not fed (the next turn's
  prefill writes it). A row still going after `max_new_tokens` ids is a turn cut into chunks: its
  last id is fed, and the output's `logits` and `window` carry it into the next call (as this
  call's `logits` and `window`), so a turn decodes the same ids whole or in chunks.

  Args:
    window: [B W] uint8 each row's stop-matching bytes of its turn so far
      (`stops.empty_window` at a turn's start).
    position: [B] int32 where each row's next fed id is written (its context length).
    active: [B] bool rows that sample at all (the others were idle in the prefill).
    decode_layout: (static) attend over the cache in `DecodeCache` layout (a copy per call),
      or in the model's with XLA's attention; None: the former on the CPU. A mesh takes the
      latter (`sharded.py`).
    The rest: as `generate`'s.
  """
  if decode_layout is None:
    decode_layout = jax.default_backend() == "cpu"
  head = transformer.head_kernel(params, cfg)
  layer_params, caches = transformer.unstack_layers(params, cache, decode_layout)
  b = logits.shape[0]

  def take(s):
    """Samples every live row's next id from s["logits"] and records it."""
    rng, key = jax.random.split(s["rng"])
    ids, logp = sample_token(s["logits"], key, temperature, top_p)
    live = ~s["done"]
    window, hit = stops_lib.push_and_match(table, s["window"], ids)
    count = s["count"] + live
    done = s["done"] | (live & (hit | (count >= max_tokens)))
    return dict(s, rng=rng, ids=ids, fed=live & ~done, done=done, count=count,
                window=window,
                tokens=s["tokens"].at[:, s["step"]].set(jnp.where(live, ids, 0)),
                logprobs=s["logprobs"].at[:, s["step"]].set(jnp.where(live, logp, 0.0)),
                step=s["step"] + 1)

  def cut(s):
    return dict(s, cut=True)

  def keep_going(s):
    return ~jnp.all(s["done"]) & ~s["cut"]

  def feed_and_take(s):
    # Feeding only inside the loop, which ends when every row is done, skips the forward pass
    # of a last id nobody reads; after `max_new_tokens` ids the feed is the cut rows' last.
    hidden, caches = transformer.decode_token(cfg, params, layer_params, s.pop("cache"), s["ids"],
                                              s["position"])
    s = dict(s, position=s["position"] + s["fed"],
             logits=transformer.logits_from_hidden(hidden, head).astype(jnp.float32))
    # The branch holds only the small per-row state: a `cond` over the caches copies them.
    return dict(jax.lax.cond(s["step"] < max_new_tokens, take, cut, s), cache=caches)

  state = take(dict(
      rng=rng, position=position, logits=logits.astype(jnp.float32), window=window,
      done=~active | (max_tokens <= 0),
      count=jnp.zeros((b,), jnp.int32),
      tokens=jnp.zeros((b, max_new_tokens), jnp.int32),
      logprobs=jnp.zeros((b, max_new_tokens), jnp.float32),
      step=jnp.zeros((), jnp.int32), cut=jnp.zeros((), bool)))
  s = jax.lax.while_loop(keep_going, feed_and_take, dict(state, cache=caches))
  return DecodeOutput(cache=transformer.stack_layers(s["cache"]), tokens=s["tokens"],
                      logprobs=s["logprobs"], num_tokens=s["count"], done=s["done"],
                      logits=s["logits"], window=s["window"])


def decode_rows(cfg: ModelConfig, params: dict, cache: transformer.KVCache, logits: Array,
                window: Array, table: stops_lib.StopTable, position: Array, active: Array,
                max_tokens: Array, rng: Array, temperature: Array, top_p: Array,
                max_new_tokens: int, rows: Array, slots: int) -> DecodeOutput:
  """`decode_steps` of the cache rows `rows` over their first `slots` slots only.

  A decode step's cost grows with the rows and the slots it attends over: at the end of a batch
  of episodes a few live rows would pay for every row, and short contexts for the whole window.
  The other rows, and slots >= `slots`, are neither read nor changed.

  Args:
    rows: [R] int32 distinct cache rows.
    slots: (static) at least every active row's `position` + `max_new_tokens`, at most the
      cache's; an idle row's writes past it are dropped.
    The rest: as `decode_steps`', at the cache's B rows (only `rows` are read).
  Returns:
    `decode_steps`' output at B rows; the rows not in `rows` sampled nothing and are done.
  """
  part = jax.tree.map(lambda c: c[:, rows, :slots], cache)  # L R slots K Dh
  out = decode_steps(cfg, params, part, logits[rows], window[rows], table, position[rows],
                     active[rows], max_tokens[rows], rng, temperature, top_p, max_new_tokens)
  cache = jax.tree.map(lambda c, p: c.at[:, rows, :slots].set(p), cache, out.cache)
  b = logits.shape[0]

  def widen(x: Array, fill) -> Array:
    return jnp.full((b,) + x.shape[1:], fill, x.dtype).at[rows].set(x)

  return DecodeOutput(cache=cache, tokens=widen(out.tokens, 0), logprobs=widen(out.logprobs, 0),
                      num_tokens=widen(out.num_tokens, 0), done=widen(out.done, True),
                      logits=widen(out.logits, 0), window=widen(out.window, 0))


@functools.partial(jax.jit, static_argnames=("cfg", "max_new_tokens"), donate_argnames=("cache",))
def generate(cfg: ModelConfig, params: dict, cache: transformer.KVCache, table: stops_lib.StopTable,
             prompt: Array, start: Array, prompt_length: Array, max_tokens: Array, rng: Array,
             temperature: Array, top_p: Array, max_new_tokens: int) -> DecodeOutput:
  """Prefills each row's new ids into its cache slots, then decodes until every row stops.

  `prefill` then `decode_steps` in one compiled call (the sampler runs them as two, to time each).

  Args:
    cfg: model config (static).
    params: model params (float, QAT-shaped or int4 serving, matching cfg.quant).
    cache: KV cache {'k','v': [L B S K Dh]}; row b holds its context at slots 0..start[b]-1.
    table: stop strings and eos ids.
    prompt: [B P] int32 new ids per row, right-padded.
    start: [B] int32 position of prompt[:, 0] (the row's current context length).
    prompt_length: [B] int32 real ids in `prompt`; 0 marks an idle row (nothing sampled).
    max_tokens: [B] int32 per-row cap on sampled ids (<= max_new_tokens).
    rng: PRNG key.
    temperature, top_p: scalars.
    max_new_tokens: static length N of the output buffers.
  """
  cache, logits = prefill(cfg, params, cache, prompt, start, prompt_length)
  return decode_steps(cfg, params, cache, logits, stops_lib.empty_window(table, prompt.shape[0]),
                      table, start + prompt_length, prompt_length > 0, max_tokens, rng,
                      temperature, top_p, max_new_tokens)


prefill_jit = jax.jit(prefill, static_argnames=("cfg",), donate_argnames=("cache",))
prefill_rows_jit = jax.jit(prefill_rows, static_argnames=("cfg", "slots"),
                           donate_argnames=("cache",))
decode_rows_jit = jax.jit(decode_rows, static_argnames=("cfg", "slots", "max_new_tokens"),
                          donate_argnames=("cache",))
