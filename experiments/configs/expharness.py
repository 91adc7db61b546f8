r"""ExpHarness: a PPO-trained retrieval copilot over a self-evolving experience graph.

CPU default (2 cores, SmolLM2-135M-Instruct as copilot, executor and summarizer, GSM-symbolic,
a few minutes):

  python -m experiments.expharness_ppo --config experiments/configs/expharness.py \
      --config.workdir=/tmp/expharness

then evaluation of the frozen graph and copilot on the held-out tasks:

  python -m experiments.expharness_eval --config experiments/configs/expharness.py \
      --config.workdir=/tmp/expharness

The paper's sizes on a GPU (batch 16, 500 steps over 2 epochs, graph capacity 2,000, K = 10):

  python -m experiments.expharness_ppo --config experiments/configs/expharness.py:gpu \
      --config.workdir=/tmp/expharness_gpu

A construction ablation trains its own graph: `--config.ablation=flat` (or
no_similarity_filter) with its own workdir; the evaluation reads it from
`--config.eval.ablation_workdirs.flat=<workdir>`.

Each section is built into its object by `runs.from_section`: copilot_model / executor_model ->
`load_policy`, copilot -> `harness.copilot.CopilotConfig`, summarizer ->
`harness.summarizer.SummarizerConfig`, graph -> `harness.GraphConfig`, retrieval ->
`harness.RetrievalConfig`, advantage -> `rl.token_advantage_fn`, loss -> `rl.LossConfig`,
value_loss -> `rl.ValueLossConfig`, optim -> `rl.actor_critic_optimizer`, endpoint ->
`harness.EndpointConfig` (when executor.kind is "http").
"""

import ml_collections


def get_config(arg: str = "") -> ml_collections.ConfigDict:
  """`arg` is '' (CPU default) or 'gpu'."""
  if arg not in ("", "cpu", "gpu"):
    raise ValueError(f"unknown expharness config variant {arg!r}; use '' (cpu) or 'gpu'")
  gpu = arg == "gpu"
  c = ml_collections.ConfigDict()
  c.workdir = "/tmp/expharness"
  c.seed = 0
  c.num_iterations = 500 if gpu else 3
  c.ablation = "full"  # or a harness.ABLATIONS name: trains the graph under that ablation

  # Tasks: each suite's tasks are shuffled with the seed, the first `eval_per_suite` held out
  # for evaluation, training draws from the rest; the two never overlap.
  c.tasks = ml_collections.ConfigDict()
  c.tasks.suites = ("gsm_symbolic",)  # static suite names, or "alfworld"
  c.tasks.per_suite = 600 if gpu else 10  # tasks taken from each suite (train + eval)
  c.tasks.eval_per_suite = 200 if gpu else 4
  c.tasks.cold_start = 64 if gpu else 2  # training tasks solved without experience first
  c.tasks.max_tokens = 512 if gpu else 48  # executor reply budget per task (per turn, agentic)
  c.tasks.alfworld_dir = ""  # a game root ('' = generated into the family's cache)
  c.tasks.alfworld_split = "train"  # games taken from it, then held out like a static suite
  c.tasks.alfworld_max_steps = 30 if gpu else 3

  c.batch_size = 16 if gpu else 2  # tasks per PPO step

  c.copilot_model = ml_collections.ConfigDict()
  c.copilot_model.gguf = ""  # '' = SmolLM2-135M-Instruct
  c.copilot_model.dtype = "float32"
  # CPU: the copilot learns in its top 10 of 30 layers (the PPO update dominated an iteration).
  c.copilot_model.no_grad_layers = 0 if gpu else 20

  c.copilot = ml_collections.ConfigDict()
  c.copilot.max_tokens = 64 if gpu else 24
  c.copilot.temperature = 1.0
  c.copilot.fallback_control = 50
  c.copilot.max_task_chars = 1500
  # SmolLM2-135M wrote no tag in 24 tokens on the CPU default's tasks: force the opening one.
  c.copilot.reply_prefix = "" if gpu else "<search>"
  # ...and, after it, wrote "R:W" literally: show it the example tags (ALFWorld's template has them).
  c.copilot.static_examples = not gpu
  c.copilot_cache_length = 1024 if gpu else 512  # the copilot sampler's window

  c.executor = ml_collections.ConfigDict()
  c.executor.kind = "sampler"  # "sampler" (local JAX model) or "http" (OpenAI-compatible)
  c.executor.cache_length = 4096 if gpu else 768
  c.executor.num_slots = 16 if gpu else 2

  c.executor_model = ml_collections.ConfigDict()  # kind "sampler"
  c.executor_model.gguf = ""
  c.executor_model.dtype = "bfloat16" if gpu else "float32"

  c.endpoint = ml_collections.ConfigDict()  # kind "http"
  c.endpoint.base_url = "http://127.0.0.1:8000/v1"
  c.endpoint.model = "smollm2"
  c.endpoint.timeout_s = 120.0
  c.endpoint.max_retries = 2

  c.summarizer = ml_collections.ConfigDict()
  c.summarizer.success_score = 0.5
  c.summarizer.max_tokens = 160 if gpu else 40
  c.summarizer.max_chars = 600

  c.graph = ml_collections.ConfigDict()
  c.graph.capacity = 2000 if gpu else 64
  c.graph.k_nn = 5
  c.graph.edge_threshold = 0.3
  c.graph.duplicate_threshold = 0.95
  c.graph.grace_insertions = 50 if gpu else 4
  c.graph.utility_ema = 0.1

  c.retrieval = ml_collections.ConfigDict()
  c.retrieval.num_seeds = 10
  c.retrieval.top_k = 10 if gpu else 3
  c.retrieval.num_ppr_candidates = 50 if gpu else 10
  c.retrieval.ucb_c = 1.0

  c.eta = 1.0  # r = (s_with - s_without) + eta * s_with

  c.advantage = ml_collections.ConfigDict()
  c.advantage.name = "gae"
  c.advantage.gamma = 1.0
  c.advantage.lam = 1.0
  c.advantage.whiten = True

  c.loss = ml_collections.ConfigDict()
  c.loss.clip_low = 0.2
  c.loss.clip_high = 0.2
  c.loss.tis_cap = 2.0
  c.loss.kl_coef = 0.01  # to the initial copilot

  c.value_loss = ml_collections.ConfigDict()
  c.value_loss.clip = 0.2
  c.value_loss.coef = 0.5

  c.optim = ml_collections.ConfigDict()
  c.optim.actor_learning_rate = 5e-6
  c.optim.critic_learning_rate = 1e-5
  c.optim.weight_decay = 0.0
  c.optim.clip_norm = 1.0
  c.optim.decay_steps = 500 if gpu else 0  # cosine decay over the paper's 500 gradient steps

  c.ppo = ml_collections.ConfigDict()
  c.ppo.epochs = 1
  c.ppo.minibatch_rows = 4 if gpu else 2
  c.ppo.seq_len = 1024 if gpu else 512

  c.checkpoint = ml_collections.ConfigDict()
  c.checkpoint.every = 20 if gpu else 1
  c.checkpoint.keep = 3

  c.eval = ml_collections.ConfigDict()
  c.eval.methods = ("no_memory", "flat_top_k", "expharness", "no_similarity_filter", "flat",
                    "no_diffusion", "no_utility_ranking")
  c.eval.ablation_workdirs = ml_collections.ConfigDict()  # ablation name -> its training workdir
  for name in ("no_similarity_filter", "flat"):
    c.eval.ablation_workdirs[name] = ""
  return c
