"""Stop strings matched on bytes inside the jitted decode loop.

Tokenisation is ambiguous (`</tool_call>` may arrive as one token or five), so stops are
matched on text: each row keeps a rolling window of its last decoded bytes, and a row stops on
the token whose bytes complete a stop string.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

# Bytes of one token that take part in matching; longer tokens are matched on their last bytes.
TOKEN_BYTES = 32


@dataclasses.dataclass(frozen=True)
class StopTable:
  """Device arrays for stop matching.

  Attributes:
    token_bytes: [V TOKEN_BYTES] uint8, each token's bytes right-aligned (zero padded on the left).
    token_length: [V] int32, number of real bytes (at most TOKEN_BYTES).
    stops: [S W] uint8, the stop strings right-aligned in W bytes.
    stop_length: [S] int32.
    eos_ids: [E] int32 ids that stop a row by themselves.
  """

  token_bytes: jax.Array
  token_length: jax.Array
  stops: jax.Array
  stop_length: jax.Array
  eos_ids: jax.Array

  @property
  def window(self) -> int:
    return self.stops.shape[1] + TOKEN_BYTES


jax.tree_util.register_dataclass(
    StopTable, data_fields=["token_bytes", "token_length", "stops", "stop_length", "eos_ids"],
    meta_fields=[])


def build_stop_table(token_strings: list[str], stop_strings: list[str],
                     eos_ids: list[int]) -> StopTable:
  """token_strings[i] is the decoded text of id i (special tokens included verbatim)."""
  vocab = len(token_strings)
  table = np.zeros((vocab, TOKEN_BYTES), np.uint8)
  length = np.zeros((vocab,), np.int32)
  for i, text in enumerate(token_strings):
    raw = text.encode("utf-8")[-TOKEN_BYTES:]
    if raw:
      table[i, TOKEN_BYTES - len(raw):] = np.frombuffer(raw, np.uint8)
    length[i] = len(raw)
  encoded = [s.encode("utf-8") for s in stop_strings if s]
  width = max([len(s) for s in encoded] + [1])
  stops = np.zeros((max(len(encoded), 1), width), np.uint8)
  stop_length = np.zeros((stops.shape[0],), np.int32)
  for i, s in enumerate(encoded):
    stops[i, width - len(s):] = np.frombuffer(s, np.uint8)
    stop_length[i] = len(s)
  return StopTable(jnp.asarray(table), jnp.asarray(length), jnp.asarray(stops),
                   jnp.asarray(stop_length), jnp.asarray(np.asarray(eos_ids or [-1], np.int32)))


def empty_window(table: StopTable, batch: int) -> jax.Array:
  return jnp.zeros((batch, table.window), jnp.uint8)


def push_and_match(table: StopTable, window: jax.Array,
                   tokens: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Appends each row's token bytes to its window; True where a stop string just completed.

  Args:
    window: [B W] uint8 rolling byte window.
    tokens: [B] int32 newly sampled ids.
  Returns:
    (new window [B W], stopped [B] bool).
  """
  w = window.shape[1]
  new_bytes = table.token_bytes[tokens]  # B TOKEN_BYTES
  n = table.token_length[tokens]  # B
  combined = jnp.concatenate([window, new_bytes], axis=1)  # B W+TOKEN_BYTES
  j = jnp.arange(w)[None, :]
  # Shift the window left by n and fill its tail with the token's n real bytes.
  index = jnp.where(j < w - n[:, None], j + n[:, None], TOKEN_BYTES + j)
  window = jnp.take_along_axis(combined, index, axis=1)
  stop_width = table.stops.shape[1]
  hit = jnp.zeros(tokens.shape, bool)
  for k in range(TOKEN_BYTES):  # a stop may end k bytes before the end of the new token
    tail = window[:, w - k - stop_width:w - k]  # B stop_width
    pos = jnp.arange(stop_width)[None, :]
    relevant = pos >= (stop_width - table.stop_length)[:, None]  # S stop_width
    equal = (tail[:, None, :] == table.stops[None]) | ~relevant[None]  # B S stop_width
    match = jnp.all(equal, axis=-1) & (table.stop_length[None] > 0)
    hit = hit | (jnp.any(match, axis=-1) & (k < n))
  hit = hit | jnp.any(tokens[:, None] == table.eos_ids[None], axis=-1)
  return window, hit
