#!/usr/bin/env bash
# Builds CPython 3.12 wheels of ALFWorld's engine for the GPU machine (Python 3.12, no internet).
#
# textworld[pddl]'s compiled parts (fast-downward-textworld, jericho) ship only as sdists, so
# they are compiled here (needs gcc/g++/cmake/make); textworld, alfworld and the small pure
# Python dependencies that the engine imports are fetched as wheels for the same interpreter.
# On the GPU machine:  pip install --no-index --no-deps .whl/*.whl
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

ls -l "${OUT}"
