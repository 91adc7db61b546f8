# As run for results/memex_cpu/2026-12-07f and 2026-12-07g (from the repository root):
#   python results/memex_cpu/2026-12-07f/plan_probe.py OUT_PREFIX TITLE "LABEL=episodes.jsonl" ...
"""Per task type, `decisions.count_plans` of each policy's episodes (games, plans written, plans
equal to the expert's for the game); JSON and a grouped bar chart."""
import collections, json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from memex_jax.agent.records import read_records
from memex_jax.demos.alfworld import task_type
from memex_jax.demos.decisions import count_plans

TYPES = {"look_at_obj_in_light": "look at\nin light", "pick_and_place_simple": "pick and\nplace",
         "pick_clean_then_place_in_recep": "clean,\nplace",
         "pick_cool_then_place_in_recep": "cool,\nplace",
         "pick_heat_then_place_in_recep": "heat,\nplace", "pick_two_obj_and_place": "pick two"}
out, title, by_label = sys.argv[1], sys.argv[2], {}
for arg in sys.argv[3:]:
  label, _, path = arg.rpartition("=")
  grouped = collections.defaultdict(list)
  for record in read_records(path):
    grouped[task_type(record["game"])].append(record)
  counts = {kind: count_plans(grouped[kind]) for kind in TYPES if kind in grouped}
  by_label[label] = {k: [c["episodes"], c["planned"], c["right"]] for k, c in counts.items()}
  print(f"{label}: games, planned, right = {np.sum(list(by_label[label].values()), 0).tolist()}")
json.dump({"columns": ["games", "planned", "right"], "by_label": by_label,
           "command": "python results/memex_cpu/2026-12-07f/plan_probe.py " +
                      " ".join(f"'{a}'" for a in sys.argv[1:])},
          open(out + ".json", "w"), indent=1)
fig, ax = plt.subplots(figsize=(9, 4.2))
width = 0.8 / len(by_label)
for i, (label, rows) in enumerate(by_label.items()):
  x = np.arange(len(TYPES)) + (i - (len(by_label) - 1) / 2) * width
  share = [rows[k][2] / rows[k][0] if k in rows else 0 for k in TYPES]
  ax.bar(x, share, width, label=label)
  for xi, s, k in zip(x, share, TYPES):
    if k in rows:
      ax.text(xi, s + 0.02, f"{rows[k][2]}/{rows[k][0]}", ha="center", fontsize=7)
ax.set_xticks(np.arange(len(TYPES)), list(TYPES.values()), fontsize=8)
ax.set_ylim(0, 1.05)
ax.set_ylabel("share of plans = the expert's")
ax.set_title(title, fontsize=10)
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(out + ".png", dpi=110)
