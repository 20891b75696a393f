#!/bin/sh
# Install crag-edge from this offline bundle into a new virtual environment in DIR.
# Uses no network: every wheel comes from wheelhouse/ (pinned by sha256 in requirements.txt)
# and every model from models/ (checked against the manifest's sha256). Needs Python 3.11
# with its venv module; set PYTHON=/path/to/python3.11 if it is not on PATH as python3.11.
set -eu
# Whatever the caller's umask, nothing installed is writable by others (the program, its
# libraries and the models are what the service runs and trusts).
umask 022

usage() {
    echo "usage: $0 DIR    install crag-edge into a new virtual environment in DIR" >&2
    exit 2
}
fail() {
    echo "error: $*" >&2
    exit 1
}

[ $# -eq 1 ] || usage
case $1 in -h | --help | "") usage ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3.11}

command -v "$PYTHON" >/dev/null 2>&1 ||
    fail "$PYTHON not found: install Python 3.11, or set PYTHON=/path/to/python3.11"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' ||
    fail "$PYTHON is not Python 3.11, which the bundle's wheels are built for"
if [ -e "$1" ] && [ -n "$(ls -A "$1")" ]; then
    fail "$1 exists and is not empty: name a new folder"
fi

"$PYTHON" -m venv "$1" || fail "could not create a virtual environment in $1 (on Debian: apt install python3.11-venv)"
DIR=$(cd "$1" && pwd)
echo "installing the wheels into $DIR"
# Only the bundle's wheels: no pip configuration of this machine (an index, extra links, a
# constraints file) takes part.
PIP_CONFIG_FILE=/dev/null "$DIR/bin/python" -m pip install --isolated --quiet --no-index \
    --disable-pip-version-check --find-links "$HERE/wheelhouse" --require-hashes \
    -r "$HERE/requirements.txt"

# Where this install looks for models when no setting names a folder (share/crag-edge/models).
MODELS="$DIR/share/crag-edge/models"
mkdir -p "$MODELS"
IDS=$(cat "$HERE/models/models.txt")
for id in $IDS; do
    [ -d "$HERE/models/$id" ] || fail "the bundle lacks models/$id: copy the whole bundle again"
    # PIP_NO_INDEX: should a file be damaged, the pull fails at once instead of trying PyPI.
    PIP_NO_INDEX=1 CRAG_EDGE_MODEL_DIR="$MODELS" \
        "$DIR/bin/crag-edge" models pull "$id" --from "$HERE/models/$id"
done
# shellcheck disable=SC2086 # one argument per model id
CRAG_EDGE_MODEL_DIR="$MODELS" "$DIR/bin/crag-edge" models verify $IDS
# Copies keep their source's modes: a bundle unpacked under a loose umask must not hand them on.
chmod -R go-w "$DIR"

cat <<EOF

crag-edge is installed in $DIR (models in $MODELS). Try it:
  $DIR/bin/crag-edge ingest --db corpus.db $HERE/sample_corpus
  $DIR/bin/crag-edge answer --db corpus.db "How does SQLite's write-ahead log let readers work during a write?"
EOF
