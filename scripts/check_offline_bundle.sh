#!/usr/bin/env bash
# The air-gapped install, checked for real: in a network namespace with no network at all
# (`unshare --net`, confirmed by a `pip download` that must fail), unpack the offline bundle
# into a new folder, run its install.sh, ingest the bundled sample corpus and answer a
# question, with no environment variable set and an empty home folder. Prints each step's
# time and the bundle's size. Needs root (for unshare) and a built bundle (`make bundle`).
#
#   sudo scripts/check_offline_bundle.sh [dist/crag-edge-bundle-<version>-<platform>.tar.gz]
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUNDLE=${1:-$(ls -t "$ROOT"/dist/crag-edge-bundle-*.tar.gz 2>/dev/null | head -1)}
[ -f "$BUNDLE" ] || { echo "error: no bundle: run \`make bundle\` first" >&2; exit 1; }
BUNDLE=$(cd "$(dirname "$BUNDLE")" && pwd)/$(basename "$BUNDLE")
WORK=$(mktemp -d /tmp/crag-edge-offline.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
echo "bundle: $BUNDLE ($(du -BM "$BUNDLE" | cut -f1))"

unshare --net bash -s "$BUNDLE" "$WORK" <<'OFFLINE'
set -euo pipefail
BUNDLE=$1 WORK=$2
step() { # step NAME COMMAND...: run it, say how long it took (on stderr: stdout is its own)
    local start=$SECONDS
    "${@:2}"
    echo "== $1: $((SECONDS - start)) s" >&2
}
fail() { echo "FAILED: $*" >&2; exit 1; }

mkdir -p "$WORK/unpacked" "$WORK/home" "$WORK/run"
# PyPI itself, with no pip configuration: this machine's may list local folders as indexes.
if PIP_CONFIG_FILE=/dev/null python3.11 -m pip download --isolated --no-deps --retries 0 \
    --timeout 5 --index-url https://pypi.org/simple --dest "$WORK/probe" pip >/dev/null 2>&1; then
    fail "pip download reached a package index: this is not an air gap"
fi
echo "== no network: pip download failed, as it must"

step unpack tar -xzf "$BUNDLE" -C "$WORK/unpacked"
HERE=$(echo "$WORK"/unpacked/crag-edge-bundle-*)
step install "$HERE/install.sh" "$WORK/crag-edge"
DIR=$WORK/crag-edge
echo "== installed size: $(du -sh "$DIR" | cut -f1)"

# No environment variable but a PATH, and a home folder with nothing in it.
clean() { env -i PATH=/usr/bin:/bin HOME="$WORK/home" "$@"; }
cd "$WORK/run"
step ingest clean "$DIR/bin/crag-edge" ingest --db corpus.db "$HERE/sample_corpus"
question="How does SQLite's write-ahead log let readers work during a write?"
step answer clean "$DIR/bin/crag-edge" answer --db corpus.db --json "$question" >answer.json
clean "$DIR/bin/python" - answer.json <<'PY'
import json, sys
reply = json.load(open(sys.argv[1]))
decision, answer = reply["decision"], reply["answer"]
print(f"== {decision}, {len(reply['citations'])} sources cited: {answer[:300]!r}")
if decision == "INCORRECT" or not reply["citations"]:
    sys.exit("FAILED: no cited answer from the sample corpus")
PY
clean "$DIR/bin/python" - <<'PY'
import llama_cpp
from crag_edge.models.llama_backends import load_cpu_backends
load_cpu_backends(llama_cpp)
loaded = {line.split("/")[-1] for line in open("/proc/self/maps") if "libggml-cpu-" in line}
print(f"== llama.cpp CPU variant chosen here: {', '.join(sorted(loaded)) or 'none (native build)'}")
if not loaded:
    raise SystemExit("FAILED: the bundle's llama-cpp-python is not the portable build")
PY
clean "$DIR/bin/python" -c "import crag_edge.server.app, crag_edge.tui.app" ||
    fail "the server or tui extra is not installed"
tools=$("$DIR/bin/python" -m pip list --disable-pip-version-check --format=freeze | grep -iE '^(pytest|mypy|ruff|torch|hypothesis|schemathesis)==' || true)
[ -z "$tools" ] || fail "test or training tools in the user install: $tools"
echo "== no test or training tool installed"
echo "OK: installed and answered with no network"
OFFLINE
