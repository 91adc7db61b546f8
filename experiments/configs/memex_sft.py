r"""SFT warm start on expert ALFWorld (or AppWorld) demonstrations written in the Memex format.

CPU default (a few steps, to check the pipeline end to end):

  python -m experiments.memex_sft --config experiments/configs/memex_sft.py \
      --config.workdir=/tmp/memex_sft

GPU (train until the loss reaches `target_loss`):

  python -m experiments.memex_sft --config experiments/configs/memex_sft.py:gpu \
      --config.workdir=/tmp/memex_sft_gpu

AppWorld: `--config.env.name=appworld` (its expert replays each task's reference solution).

Going on from an earlier SFT with other demonstrations (a new workdir; a resumed run must keep
its own): `--config.init_checkpoint=/tmp/memex_sft/params --config.demos.dir=NEW_DEMOS`.

Then start RL from it: `--config.init_checkpoint=/tmp/memex_sft_gpu/params` on memex_grpo.
"""

import ml_collections

from experiments.configs import memex_grpo


def get_config(arg: str = "") -> ml_collections.ConfigDict:
  """`arg` is '' (CPU default) or 'gpu'."""
  gpu = arg == "gpu"
  rl = memex_grpo.get_config(arg)
  c = ml_collections.ConfigDict()
  c.workdir = "/tmp/memex_sft"
  c.seed = 0
  c.model = rl.model
  c.env = ml_collections.ConfigDict()
  c.env.name = rl.env.name  # the environment family (`memex_jax.envs.families`)
  c.games = rl.games
  c.games.num = 512 if gpu else 4
  c.demos = ml_collections.ConfigDict()
  c.demos.num = 1024 if gpu else 4
  c.demos.dir = ""  # "" = <workdir>/demonstrations, written if missing
  c.demos.agent = ml_collections.ConfigDict()  # overrides of the family's SmolLM2 agent preset
  # The status line and prompt must match the agent that will be evaluated or trained; the window
  # only has to hold the expert's CompressExperience turns (the agent never sees it).
  c.demos.agent.context_window = 8192 if gpu else 2304
  c.demos.agent.threshold = rl.agent.threshold
  c.demos.agent.prompt_style = rl.agent.prompt_style
  c.demos.agent.summary_token_budget = rl.agent.summary_token_budget
  c.demos.agent.offer_free_index = rl.agent.offer_free_index
  # One step's [rows, seq_len] minibatch; an epoch packs every demonstration segment.
  c.batch = ml_collections.ConfigDict()
  c.batch.rows = 8 if gpu else 1
  c.batch.seq_len = 8192 if gpu else 2048  # the system prompt alone is ~950 tokens
  c.mesh = rl.mesh
  # A params export to start from (an earlier SFT's <workdir>/params, to go on with new
  # demonstrations); "" = the packaged weights.
  c.init_checkpoint = ""
  c.optim = ml_collections.ConfigDict()
  c.optim.learning_rate = 1e-4
  c.optim.weight_decay = 0.1
  c.optim.clip_norm = 1.0
  c.optim.warmup_steps = 20 if gpu else 0
  # > 0: after the warm-up the rate falls along a cosine to final_fraction of its peak over this
  # many steps (rl.learning_rate_schedule); 0 keeps it constant.
  c.optim.decay_steps = 0
  c.optim.final_fraction = 0.1
  c.num_steps = 400 if gpu else 3
  # Weight in the loss of a CompressExperience turn's tokens against any other turn's (the
  # held-out loss stays unweighted, comparable across settings).
  c.compress_weight = 1
  c.target_loss = 0.0  # stop once the smoothed loss is below it (0: never)
  c.max_minutes = 0.0  # stop after this many minutes of training (0: no time budget)
  # Held-out demonstrations: their loss picks the exported params and stops a run that no longer
  # improves.
  c.heldout = ml_collections.ConfigDict()
  c.heldout.one_in = 10 if gpu else 0  # every n-th demonstration is held out (0: none)
  c.heldout.every = 25 if gpu else 1  # steps between held-out measurements
  c.heldout.patience = 3  # measurements without a new best before stopping (0: never stop)
  c.log_every = 10 if gpu else 1
  c.checkpoint = ml_collections.ConfigDict()
  c.checkpoint.every = 50 if gpu else 1  # a killed run resumes from its last checkpoint
  c.checkpoint.keep = 2
  return c
