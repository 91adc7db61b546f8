r"""A policy's search decisions on the expert's own contexts (teacher forced).

At each expert turn that restates a searched place and the kind it seeks, then decides
("cabinet 2 has candle 2, soapbar 2: cloth: none." or "...: cloth 1 is the cloth the task
needs"), the policy reads the expert's context through the kind; its most likely next token is
its decision: ":" (search on) or anything else (take). The decisions are counted against
whether the place held the kind, as `python -m memex_jax.demos.decisions` counts a policy's own
rollouts, beside the mean probability of searching on and how many restated lists (the kind
with them) the policy's argmax copies exactly. Wrong here means the policy cannot make the
decision; right here but wrong in its rollouts means it makes it on the expert's contexts and
not on its own.

  python -m launch.decision_probe --checkpoint WORK/sft/params --demos DEV_DEMOS \
      [--num 24] [--matmul_dtype bfloat16] [--out results/.../decision_probe.json]

DEV_DEMOS is a `memex_jax.demos.dataset` folder of games the policy did not train on (train-split
games of another seed: never the evaluation games).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shlex
import sys
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import tqdm

from memex_jax import runs
from memex_jax.agent import ChatRenderer
from memex_jax.agent.chat import Message
from memex_jax.demos import dataset, decisions
from memex_jax.demos.alfworld import decision_spans
from memex_jax.demos.alfworld_text import SEARCH_ON
from memex_jax.models import transformer
from memex_jax.models.policy import load_policy

# Rows and the positions read are padded to multiples of these, so few shapes compile.
PAD_TO, PAD_WHERE = 256, 64


def make_forward(cfg: Any, params: dict) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
  """(ids [T], positions [P]) -> float32 logits [P V] at those positions, teacher forced."""
  model = transformer.Transformer(cfg)

  @jax.jit
  def logits_at(tokens, where):  # [1 T], [P]
    positions = jnp.arange(tokens.shape[1])[None]  # 1 T
    hidden, _ = model.apply({"params": params}, tokens, positions, return_hidden=True)  # 1 T D
    return transformer.logits_from_hidden(hidden[0, where], transformer.head_kernel(params, cfg),
                                          cfg.matmul_dtype)  # P V

  def forward(ids: np.ndarray, where: np.ndarray) -> np.ndarray:
    padded = np.zeros((1, -(-len(ids) // PAD_TO) * PAD_TO), np.int32)
    padded[0, :len(ids)] = ids
    at = np.full(-(-len(where) // PAD_WHERE) * PAD_WHERE, where[-1], np.int32)
    at[:len(where)] = where
    return np.asarray(logits_at(padded, at))[:len(where)]

  return forward


def probe_segment(forward: Callable, renderer: ChatRenderer, search_on_id: int,
                  messages: Sequence[Mapping[str, str]]) -> list[dict[str, Any]]:
  """One row per decision of the segment: the restated text ("cabinet 2 has candle 2: cloth"),
  whether the place held the kind, the policy's decision, P(search on), and how many of the
  restated tokens its argmax copies."""
  chat = [Message(m["role"], m["content"]) for m in messages]
  rendered = renderer.render(chat)
  ids = rendered.ids
  spans = decision_spans(messages, np.asarray(rendered.loss_mask), renderer.tokenizer)
  if not spans:
    return []
  # Logits at position p predict token p + 1: the restated tokens from the one before the first.
  where = np.concatenate([np.arange(first - 1, decides) for _, first, decides in spans])
  logits = forward(np.asarray(ids), where)  # P V
  rows, at = [], 0
  for d, first, decides in spans:
    n = decides - first  # the restated tokens, through the kind
    span = logits[at:at + n + 1]
    at += n + 1
    copied = np.argmax(span[:n], axis=-1) == np.asarray(ids[first:decides])
    last = span[n] - span[n].max()
    p_search_on = float(np.exp(last[search_on_id]) / np.exp(last).sum())
    rows.append({"restated": renderer.tokenizer.decode(ids[first:decides]),
                 "present": d.present, "takes": int(np.argmax(last)) != search_on_id,
                 "p_search_on": p_search_on,
                 "list_tokens": n, "list_tokens_copied": int(copied.sum())})
  return rows


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
  """`decisions.tally` of the rows (restated_exact: every restated token copied), P(search on)
  at places without and with the kind, and the restated tokens copied."""
  counts: dict[str, Any] = decisions.tally(
      (row["present"], row["takes"], row["list_tokens_copied"] == row["list_tokens"])
      for row in rows)
  for present, name in ((False, "p_search_on_absent"), (True, "p_search_on_present")):
    p = [row["p_search_on"] for row in rows if row["present"] == present]
    counts[name] = float(np.mean(p)) if p else float("nan")
  counts["list_tokens"] = sum(row["list_tokens"] for row in rows)
  counts["list_tokens_copied"] = sum(row["list_tokens_copied"] for row in rows)
  return counts


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--checkpoint", default="", help="exported params ('' = the packaged "
                      "weights)")
  parser.add_argument("--demos", required=True, help="a demonstration dataset folder")
  parser.add_argument("--num", type=int, default=24, help="demonstrations read, in order")
  parser.add_argument("--matmul_dtype", default="", choices=("", "bfloat16"))
  parser.add_argument("--label", default="policy", help="the table row's name")
  parser.add_argument("--out", help="a JSON file for the counts and every decision's row")
  args = parser.parse_args(argv)
  cfg, params, tokenizer = load_policy(matmul_dtype=args.matmul_dtype)
  if args.checkpoint:
    params = runs.import_params(args.checkpoint, params)
  renderer = ChatRenderer(tokenizer)
  search_on_id = tokenizer.encode(SEARCH_ON)[0]  # the ":" that follows the kind
  forward = make_forward(cfg, params)
  records = dataset.demonstration_records(args.demos)[:args.num]
  rows = []
  for record in tqdm.tqdm(records, desc="decision probe"):
    for messages in record["segments"]:
      rows += [{"game": record["game"], **row}
               for row in probe_segment(forward, renderer, search_on_id, messages)]
  counts = summarize(rows)
  table = decisions.markdown_table({args.label: counts})
  print(table + f"\n\nP(search on) at places without the kind {counts['p_search_on_absent']:.3f}, "
        f"with it {counts['p_search_on_present']:.3f}; restated tokens copied "
        f"{counts['list_tokens_copied']} of {counts['list_tokens']}.")
  if args.out:
    command = "python -m launch.decision_probe " + shlex.join(
        sys.argv[1:] if argv is None else list(argv))
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).write_text(json.dumps(
        {"command": command, "counts": counts, "decisions": rows}, indent=1))
  return counts


if __name__ == "__main__":
  main()
