# `stage NAME DONE_FILE COMMAND...` for the launch scripts' timed runs: runs COMMAND unless
# DONE_FILE exists (a rerun goes on where a stopped run left off) and records its wall time in
# WORK/stages.json ({"command": RUN_COMMAND, "stages": [{"name", "seconds", "command"}, ...]},
# what launch/proof_report.py reads), so a run cut short keeps the times of the stages it
# finished. Each stage keeps the command that ran it: a rerun with other settings goes on from
# the stages done before, and the report names both commands.
# The sourcing script sets WORK, PYTHON and RUN_COMMAND.
#
# `caller_settings NAME...` prints NAME="value" for each NAME the caller set, so a script that
# calls it before filling in its defaults records the variables its run command was given.
caller_settings() {
  local name out=""
  for name in "$@"; do
    if [ -n "${!name+set}" ]; then out+="${name}=\"${!name}\" "; fi
  done
  printf '%s' "${out}"
}
stage() {
  local name="$1" done_file="$2" start end
  shift 2
  if [ -e "${done_file}" ]; then echo "== ${name}: done before (${done_file})"; return; fi
  echo "== ${name}: $*"
  start=$(date +%s.%N)
  "$@"
  end=$(date +%s.%N)
  "${PYTHON}" - "${WORK}/stages.json" "${name}" "${start}" "${end}" "${RUN_COMMAND}" <<'EOF'
import json, pathlib, sys
path, name, start, end, command = sys.argv[1:]
p = pathlib.Path(path)
record = json.loads(p.read_text()) if p.exists() else {"stages": []}
record["stages"] = [s for s in record["stages"] if s["name"] != name]
record["stages"].append({"name": name, "seconds": round(float(end) - float(start), 1),
                         "command": command})
record["command"] = command  # the latest run's
p.write_text(json.dumps(record, indent=1))
print(f"== {name}: {float(end) - float(start):.0f} s")
EOF
}
