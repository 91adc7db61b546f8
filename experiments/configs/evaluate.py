r"""Greedy evaluation on the valid_seen (140) and valid_unseen (134) ALFWorld splits.

  python -m experiments.evaluate --config experiments/configs/evaluate.py \
      --config.checkpoint=/tmp/memex_grpo/params --config.workdir=/tmp/memex_eval

Each memory regime (Memex, full context with hard truncation, summary-only) runs the same
checkpoint on the same games with fixed seeds; results are a table, JSON and a PNG, and every
episode's trajectory is written as it finishes (a stopped evaluation resumes where it stopped).
`--config.checkpoint=''` evaluates the packaged SmolLM2 weights. On AppWorld:
`--config.env.name=appworld --config.splits="('test_normal','test_challenge')"`.
"""

import ml_collections

from experiments.configs import memex_grpo


def get_config(arg: str = "") -> ml_collections.ConfigDict:
  """`arg` is '' (CPU-sized) or 'gpu' (model and agent settings of memex_grpo's variant)."""
  train = memex_grpo.get_config(arg)
  c = ml_collections.ConfigDict()
  c.workdir = "/tmp/memex_eval"
  c.checkpoint = ""  # a <workdir>/params folder of memex_sft or memex_grpo
  c.model = train.model
  c.games = train.games  # split and num are set per evaluated split
  c.env = train.env
  c.agent = train.agent
  c.chat = train.chat
  c.splits = ("valid_seen", "valid_unseen")  # ALFWorld's; AppWorld: test_normal, test_challenge
  c.num_games = -1  # -1 = the whole split (140 / 134); smaller for a quick look
  c.regimes = ("memex", "full_context", "summary_only")
  c.batch_episodes = 16 if arg == "gpu" else 4  # episodes decoded at once (rounded up to the mesh)
  c.chunk_tokens = train.sampler.chunk_tokens  # see SamplerConfig.chunk_tokens
  c.mesh = train.mesh  # decoding is data-parallel over data * fsdp; params lie as in training
  c.seed = 0
  return c
