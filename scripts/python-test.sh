#!/usr/bin/env bash
# Builds the memtopo Python wheel (crates/memtopo-py) with maturin and runs its pytest
# suite against the installed wheel, in a virtual environment under target/ that this
# script creates (docs/python.md). Needs python3 (≥ 3.8) with venv and PyPI access.
#
# Exit status: 0 when every test passed; 1 when a test failed or none ran; 2 when the
# environment or the build failed.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=target/python-venv
WHEELS=target/wheels

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 8))'; then
    echo "python-test: $PYTHON is missing or older than 3.8" >&2
    exit 2
fi
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV" || { echo "python-test: cannot create $VENV" >&2; exit 2; }
fi
PY="$VENV/bin/python"
"$PY" -m pip install --quiet --upgrade pip >/dev/null
"$PY" -m pip install --quiet "maturin>=1.9,<2" "pytest>=7" \
    || { echo "python-test: cannot install maturin and pytest" >&2; exit 2; }
# pandas is optional for the module; the tests use it where it installs.
"$PY" -m pip install --quiet pandas || echo "python-test: pandas not installed; its test is skipped" >&2

rm -rf "$WHEELS"
"$VENV/bin/maturin" build --release --locked --quiet \
    --manifest-path crates/memtopo-py/Cargo.toml --out "$WHEELS" \
    || { echo "python-test: maturin build failed" >&2; exit 2; }
wheel=$(ls "$WHEELS"/memtopo-*.whl)
"$PY" -m pip install --quiet --force-reinstall --no-deps "$wheel" \
    || { echo "python-test: cannot install $wheel" >&2; exit 2; }
echo "python-test: built and installed $(basename "$wheel")"

set +e
# Run from outside the source tree so the installed wheel is what is imported.
(cd target && "../$PY" -m pytest -q -p no:cacheprovider ../crates/memtopo-py/pytests)
status=$?
set -e
case $status in
    0) echo "python-test: all tests passed" ;;
    5) echo "python-test: pytest collected no tests" >&2; exit 1 ;;
    1) echo "python-test: tests failed" >&2; exit 1 ;;
    *) echo "python-test: pytest could not run (exit $status)" >&2; exit 2 ;;
esac
