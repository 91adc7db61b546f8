"""Teacher forced: the SFT policy's next-token choices inside the plan turn of its train demos
(as run for results/memex_cpu/2026-12-07f: python THIS CHECKPOINT KINDS; see plan_teacher_forced.txt)."""
import json, glob, sys
import numpy as np, jax
from memex_jax import runs
from memex_jax.models.policy import load_policy
from launch.decision_probe import make_forward
from memex_jax.rl.sample import trained_runs
ckpt, kinds = sys.argv[1], sys.argv[2].split(",")
cfg, params, tok = load_policy(matmul_dtype="bfloat16")
params = runs.import_params(ckpt, params)
fwd = make_forward(cfg, params)
seen = {k: 0 for k in kinds}
for f in sorted(glob.glob("/work/runs/proof22/demos/segments-*")):
  for line in open(f):
    r = json.loads(line)
    kind = next((k for k in kinds if k in r["game"]), None)
    if r["segment_index"] or kind is None or seen[kind] >= 3: continue
    seen[kind] += 1
    ids, mask = np.array(r["token_ids"]), np.array(r["loss_mask"])
    run = [x for x in trained_runs(mask) if mask[x].max() == 4][0]
    where = run - 1  # logits at p predict token p+1
    logits = np.asarray(fwd(ids, where))
    lp = jax.nn.log_softmax(logits, -1)
    target = ids[run]
    arg = logits.argmax(-1)
    wrong = [(tok.decode([int(t)]), tok.decode([int(a)]), float(np.exp(lp[i, t])))
             for i, (t, a) in enumerate(zip(target, arg)) if t != a]
    print(r["game"].split("/")[-2][:55], "| tokens", len(run), "| argmax wrong at", len(wrong))
    print("   ", wrong[:12])
