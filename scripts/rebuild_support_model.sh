#!/bin/sh
# Rebuild the shipped support model (crag_edge/shipped_models/support_model/) from nothing: ingest the
# documentation it learns from, make the pairs, train, export, check and ship it.
#
#   apt-get install -y git-doc sqlite3-doc      # once; the pages the pairs come from
#   sh scripts/rebuild_support_model.sh [WORK_DIR] [SCIFACT_DIR]
#
# Run from the repository with the venv's python first on PATH (or PYTHON=...); needs the
# `train` extra. Its time on two shared cores is in docs/training.md ("Support model").
set -eu
WORK=${1:-build/support-model}
SCIFACT=${2:-../shared/data/scifact}
PY=${PYTHON:-python}
GIT_DOC=/usr/share/doc/git-doc
SQLITE_DOC=/usr/share/doc/sqlite3
if [ ! -d "$GIT_DOC" ] || [ ! -d "$SQLITE_DOC" ]; then
    echo "the pages are missing: apt-get install -y git-doc sqlite3-doc" >&2
    exit 1
fi
mkdir -p "$WORK"
# The pages of docs/answer-quality.md's corpora ("Truthfulness").
GIT_PAGES="git-stash git-bisect git-revert git-cherry-pick git-clean git-worktree git-tag git-mv
git-rm git-restore git-switch git-reflog git-describe git-archive git-notes gitignore
git-sparse-checkout git-blame git-gc git-init git-clone git-remote git-reset git-status"
SQLITE_PAGES="lang_createtable lang_createindex lang_altertable lang_vacuum lang_transaction
lang_savepoint lang_attach lang_upsert lang_returning lang_with lang_datefunc lang_corefunc
lang_aggfunc lang_mathfunc lang_conflict lang_explain lang_analyze lang_createtrigger
lang_createview lang_delete lang_insert lang_replace lang_reindex lang_indexedby lang_select
lang_expr datatype3 stricttables withoutrowid autoinc foreignkeys partialindex expridx gencol
wal limits json1 windowfunctions inmemorydb tempfiles isolation rowidtable backup pragma
lang_keywords lang_naming lang_dropindex lang_droptable uri"
# shellcheck disable=SC2086  # the page lists are split into words on purpose
$PY -m crag_edge.cli ingest --db "$WORK/git-doc.db" $(for p in $GIT_PAGES; do echo "$GIT_DOC/$p.html"; done)
# shellcheck disable=SC2086
$PY -m crag_edge.cli ingest --db "$WORK/sqlite-doc.db" $(for p in $SQLITE_PAGES; do echo "$SQLITE_DOC/$p.html"; done)
rm -rf "$WORK/formats"
$PY scripts/formats_folder.py "$WORK/formats"
$PY -m crag_edge.cli ingest --db "$WORK/formats.db" "$WORK/formats/docs"
$PY scripts/support_pairs.py --corpus git-doc="$WORK/git-doc.db" \
    --corpus sqlite-doc="$WORK/sqlite-doc.db" --corpus formats="$WORK/formats.db" \
    --tables sqlite-doc="$SQLITE_DOC/*.html" --scifact "$SCIFACT" --out "$WORK/support-pairs.jsonl"
$PY scripts/train_support_model.py --pairs "$WORK/support-pairs.jsonl" --heldout-corpus formats \
    --out "$WORK/model" --budget-minutes 26 --max-validation 600 --layers 4 --epochs 0.6 \
    --threads 1
$PY scripts/ship_evaluator.py "$WORK/model/release" --support
