# As run for results/expharness_cpu/2026-12-07c (from the repository root: python THIS 16 320); it
# wrote its rows under /work/runs/he_check, copied here as executor_check.json.
"""The Qwen2.5-coder-0.5b executor (q4_k_m, the project's JAX sampler, greedy) on *training*
tasks of a static suite (never the 40 held out): its No-Memory score, reply tokens and seconds,
through the same executor and metric the learning run uses."""
import json, sys, time
import numpy as np
from experiments import expharness_setup
from experiments.configs import expharness

n, budget = int(sys.argv[1]), int(sys.argv[2])
suite = sys.argv[3] if len(sys.argv) > 3 else "humaneval"
c = expharness.get_config()
c.tasks.suites = (suite,); c.tasks.per_suite = 164; c.tasks.eval_per_suite = 40
c.tasks.max_tokens = budget
c.executor.num_slots = 8; c.executor.cache_length = 1024
c.executor_model.gguf = "qwen2.5-coder-0.5b-instruct"
train, held = expharness_setup.split_tasks(c)
tasks = [t.executor_task for t in train][:n]
assert not {t.task.id for t in tasks} & {t.task_id for t in held}
ex = expharness_setup.build_executor(c).executor
rows, t0 = [], time.time()
for i in range(0, n, 8):
  batch = tasks[i:i + 8]
  t1 = time.time()
  for t, r in zip(batch, ex.solve(batch, [[]] * len(batch))):
    rows.append(dict(id=t.task.id, score=r.score, detail=r.detail[:200], reply=r.response,
                     prompt_tokens=r.prompt_tokens, completion_tokens=r.completion_tokens))
    print(json.dumps({k: v for k, v in rows[-1].items() if k != "reply"}), flush=True)
  print(f"batch {i // 8}: {time.time() - t1:.0f} s", flush=True)
summary = dict(suite=suite, n=len(rows), budget=budget, seconds=round(time.time() - t0, 1),
               score=float(np.mean([r["score"] for r in rows])),
               completion_tokens=float(np.mean([r["completion_tokens"] for r in rows])),
               at_budget=float(np.mean([r["completion_tokens"] >= budget for r in rows])))
print(json.dumps(summary))
json.dump({"summary": summary, "rows": rows},
          open(f"/work/runs/he_check/{suite}_{n}_{budget}.json", "w"), indent=1)
