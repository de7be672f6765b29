#!/usr/bin/env bash
# Runs the Python package's tests against this build.
# usage: run_python_tests.sh SOURCE_DIR LIBGANNET GANNET_CLI ABI_SIZES pytest|pip-install
#   pytest:      python/tests with pytest, the package from the source tree, this build's library
#   pip-install: `pip install --no-build-isolation --no-index ./python` into a temporary folder
#                (offline; the build packages this build's library, GANNET_PREBUILT_LIBRARY),
#                then the installed package, imported from elsewhere, generates with its own copy
# Exit 77 (ctest's SKIP_RETURN_CODE) with a message when a tool is missing.
set -uo pipefail
src=$1 lib=$2 cli=$3 abi_sizes=$4 what=$5
py=${PYTHON:-python3}
skip() { echo "SKIP: $*"; exit 77; }
command -v "$py" > /dev/null || skip "$py is not installed"
"$py" -c 'import sys; sys.exit(sys.version_info < (3, 9))' || skip "$py is older than 3.9"
case $what in
  pytest)
    "$py" -c 'import pytest' 2> /dev/null ||
      skip "pytest is not installed for $py (tools/install_deps.sh installs it)"
    cd "$src/python/tests" || exit 1
    exec env GANNET_LIBRARY="$lib" GANNET_CLI="$cli" GANNET_ABI_SIZES="$abi_sizes" \
      PYTHONPATH="$src/python" PYTHONDONTWRITEBYTECODE=1 \
      "$py" -m pytest -q -p no:cacheprovider .
    ;;
  pip-install)
    "$py" -m pip --version > /dev/null 2>&1 || skip "pip is not installed for $py"
    "$py" -c 'import scikit_build_core' 2> /dev/null ||
      skip "scikit-build-core is not installed for $py (tools/install_deps.sh installs it)"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    "$py" -m pip install -q --no-build-isolation --no-index --no-deps --target "$tmp/site" \
      -C build-dir="$tmp/build" -C cmake.define.GANNET_PREBUILT_LIBRARY="$lib" "$src/python" ||
      { echo "FAIL: pip install of $src/python"; exit 1; }
    [ -f "$tmp/site/gannet/libgannet.so" ] || { echo "FAIL: the package has no libgannet.so"; exit 1; }
    cd "$tmp" || exit 1
    env -u GANNET_LIBRARY PYTHONPATH="$tmp/site" "$py" - "$src/tests/data/tiny/trained" "$tmp/site" <<'PY'
import sys
import gannet
from gannet import _ffi

model, site = sys.argv[1], sys.argv[2]
assert gannet.__file__.startswith(site), gannet.__file__
assert _ffi.lib()._name.startswith(site), _ffi.lib()._name  # its own library, not another
with gannet.Engine(model, backend="cpu", num_threads=2) as e:
    out = e.generate("In the beginning God", max_tokens=8, ignore_eos=True)
assert len(out.tokens) == 8 and out.text, out
print("installed package ok:", repr(out.text))
PY
    ;;
  *) echo "unknown mode $what"; exit 2 ;;
esac
