# As run for results/expharness_cpu/2026-12-07b (from the repository root: python THIS 3); its
# rows are the "parity" entry of executor_check.json.
"""Qwen2.5-coder-0.5b (q4_k_m GGUF): our JAX logits vs transformers', and its MMLU answers on
training tasks (never the held-out 40): greedy reply (48 tokens) and letter-logit choice."""
import json, sys, time
import numpy as np, jax, jax.numpy as jnp, torch, transformers, ml_collections
from memex_jax.models import pretrained, transformer
from memex_jax.models.policy import load_policy
from memex_jax.agent.chat import ChatRenderer
from memex_jax.harness import prompts
from memex_jax.envs.static import metrics
from experiments import expharness_setup
from experiments.configs import expharness

n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
c = expharness.get_config()
c.tasks.suites = ("mmlu",); c.tasks.per_suite = 130; c.tasks.eval_per_suite = 40
train, held = expharness_setup.split_tasks(c)
held_ids = {t.task_id for t in held}
records = [t.executor_task.task for t in train][:n]
assert not {r.id for r in records} & held_ids
cfg, params, tok = load_policy("qwen2.5-coder-0.5b-instruct")
renderer = ChatRenderer(tok)
path = pretrained.qwen_coder_gguf_path()
hf = transformers.AutoModelForCausalLM.from_pretrained(
    str(path.parent), gguf_file=path.name, torch_dtype=torch.float32)
hf.eval()
model = transformer.Transformer(cfg)
letters = [tok.encode(x)[0] for x in "ABCD"]
rows = []
for r in records:
  ids = renderer.prompt_ids(prompts.static_messages(r))
  t0 = time.time()
  logits_j, _ = model.apply({"params": params}, jnp.asarray([ids]),
                            jnp.arange(len(ids))[None])
  lj = np.asarray(logits_j[0, -1], np.float32)
  with torch.no_grad():
    lt = hf(torch.tensor([ids])).logits[0, -1].numpy()
    out = hf.generate(torch.tensor([ids]), max_new_tokens=48, do_sample=False)
  reply = tok.decode([i for i in out[0, len(ids):].tolist() if i != renderer.end_id])
  # letter choice after the reply's usual opening "The correct answer is ("
  opening = ids + tok.encode("The correct answer is (")
  with torch.no_grad():
    lo = hf(torch.tensor([opening])).logits[0, -1].numpy()
  pick = "ABCD"[int(np.argmax(lo[letters]))]
  verdict = metrics.score(r, reply)
  rows.append(dict(id=r.id, answer=r.answer, reply=reply, greedy=verdict.value,
                   letter_pick=pick, letter_ok=pick == r.answer,
                   max_abs_logit_diff=float(np.abs(lj - lt).max()),
                   top1_same=int(np.argmax(lj)) == int(np.argmax(lt))))
  print(json.dumps(rows[-1])[:300], f"{time.time()-t0:.1f}s", flush=True)
print("greedy acc", np.mean([x["greedy"] for x in rows]),
      "letter acc", np.mean([x["letter_ok"] for x in rows]),
      "max diff", max(x["max_abs_logit_diff"] for x in rows),
      "top1 agree", np.mean([x["top1_same"] for x in rows]))
json.dump(rows, open("/work/runs/qwen_check/rows.json", "w"), indent=1)
