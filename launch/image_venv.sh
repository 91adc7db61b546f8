#!/usr/bin/env bash
# A Python 3.12 venv that stands in for the GPU machine's image on this CPU machine, for dry runs
# of the device scripts (SCALE=cpu launch/device_checks.sh) before any device time is spent.
#
# It holds what the image holds and memex_jax needs, not this project's pins: the versions that
# the device tool's KINDS.md lists for the image (2026-11) are pinned; packages it lists without
# a version (optax, orbax-checkpoint, chex, scipy, matplotlib, ...) come at PyPI's newest, and so
# may differ from the image. Nothing the image lacks is installed (tensorflow-datasets,
# array_record, torch): what memex_jax needs beyond it travels as launch/gpu_wheels.sh's wheels,
# which device_env.sh installs into the venv's PYTHONPATH as it does there.
#
# Usage: launch/image_venv.sh [VENV]   (default /tmp/image_venv; reused when it exists)
set -euo pipefail
VENV="${1:-/tmp/image_venv}"
PY312="${PY312:-${HOME}/.pyenv/versions/3.12.1/bin/python}"

if [ ! -x "${VENV}/bin/python" ]; then
  "${PY312}" -m venv "${VENV}"
fi
"${VENV}/bin/python" -c 'import sys; assert sys.version_info[:2] == (3, 12), sys.version' \
  || { echo "${VENV} is not a Python 3.12 venv" >&2; exit 1; }
"${VENV}/bin/python" -m pip install -q \
  "jax==0.11.2" "jaxlib==0.11.2" "flax==0.12.10" "numpy==2.5.2" "transformers==5.17.0" \
  "tokenizers==0.23.2" "safetensors==0.8.0" "sentencepiece==0.2.2" \
  optax orbax-checkpoint chex scipy matplotlib tqdm jinja2 psutil tensorboard
"${VENV}/bin/python" -c 'import jax; print("image venv:", jax.__version__, jax.devices())'
