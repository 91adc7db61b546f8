# As run for results/expharness_cpu/2026-12-07b (from the repository root: python THIS 24 48,96);
# it wrote its rows under /work/runs/qwen_check, copied here as executor_check.json.
"""Qwen2.5-coder-0.5b (q4_k_m) on MMLU *training* tasks (never the 40 held out): greedy replies
under the executor's No-Memory prompt at several token budgets, scored by the suite's metric,
and the letter its logits prefer after 'The correct answer is ('."""
import json, sys, time
import numpy as np, torch, transformers
from memex_jax.models import pretrained
from memex_jax.tokenizers import Tokenizer
from memex_jax.agent.chat import ChatRenderer
from memex_jax.harness import prompts
from memex_jax.envs.static import metrics
from experiments import expharness_setup
from experiments.configs import expharness

n, budgets = int(sys.argv[1]), [int(b) for b in sys.argv[2].split(",")]
c = expharness.get_config()
c.tasks.suites = ("mmlu",); c.tasks.per_suite = 130; c.tasks.eval_per_suite = 40
train, held = expharness_setup.split_tasks(c)
records = [t.executor_task.task for t in train][:n]
assert not {r.id for r in records} & {t.task_id for t in held}
path = pretrained.qwen_coder_gguf_path()
tok = Tokenizer.from_gguf(str(path))
renderer = ChatRenderer(tok)
torch.set_num_threads(2)
hf = transformers.AutoModelForCausalLM.from_pretrained(
    str(path.parent), gguf_file=path.name, torch_dtype=torch.float32).eval()
letters = [tok.encode(x)[0] for x in "ABCD"]
rows = []
for r in records:
  t0 = time.time()
  ids = renderer.prompt_ids(prompts.static_messages(r))
  with torch.no_grad():
    out = hf.generate(torch.tensor([ids]), max_new_tokens=max(budgets), do_sample=False)
    lo = hf(torch.tensor([ids + tok.encode("The correct answer is (")])).logits[0, -1].numpy()
  new = out[0, len(ids):].tolist()
  row = dict(id=r.id, answer=r.answer, letter_pick="ABCD"[int(np.argmax(lo[letters]))])
  for b in budgets:
    reply = tok.decode([i for i in new[:b] if i != renderer.end_id])
    v = metrics.score(r, reply)
    row[f"score_{b}"], row[f"detail_{b}"] = v.value, v.detail
  row["reply"] = tok.decode([i for i in new if i != renderer.end_id])
  rows.append(row)
  print(json.dumps({k: v for k, v in row.items() if k != "reply"}), f"{time.time()-t0:.1f}s",
        flush=True)
summary = {f"acc_{b}": float(np.mean([x[f"score_{b}"] for x in rows])) for b in budgets}
summary |= {f"no_option_{b}": float(np.mean([x[f"detail_{b}"] == "option None" for x in rows]))
            for b in budgets}
summary["letter_logit_acc"] = float(np.mean([x["letter_pick"] == x["answer"] for x in rows]))
summary["n"] = len(rows)
print(json.dumps(summary))
json.dump({"summary": summary, "rows": rows},
          open(f"/work/runs/qwen_check/budget_{n}.json", "w"), indent=1)
