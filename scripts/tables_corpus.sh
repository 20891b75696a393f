#!/usr/bin/env bash
# The corpus of the table question set (docs/data/tables-qa.jsonl, docs/formats.md "Tables
# measured"): table-heavy pages of HTML manuals as Debian installs them, one per generator
# (DocBook XSL, Sphinx, texinfo's makeinfo, MediaWiki, SQLite's own), and three PostgreSQL
# data type pages made into .docx, .odt and .epub by pandoc. Then ingests the folder.
#
#   apt-get install -y debian-reference-en python3-doc r-doc-html cppreference-doc-en-html \
#     sqlite3-doc postgresql-doc-15 pandoc
#   bash scripts/tables_corpus.sh /tmp/tables-corpus /tmp/tables.db
#
# CRAG_EDGE names the command (default `crag-edge`; from a checkout:
# CRAG_EDGE="python -m crag_edge.cli"). The database is made anew.
set -euo pipefail
OUT=${1:?usage: tables_corpus.sh CORPUS_DIR DB}
DB=${2:?usage: tables_corpus.sh CORPUS_DIR DB}
CRAG=${CRAG_EDGE:-crag-edge}
PYDOC=/usr/share/doc/python3/html/library
PGDOC=/usr/share/doc/postgresql-doc-15/html

rm -rf "$OUT" && mkdir -p "$OUT"/{debian-reference,python,r,cppreference,sqlite,converted}
cp /usr/share/debian-reference/ch02.en.html /usr/share/debian-reference/ch10.en.html \
  "$OUT/debian-reference/"                                              # DocBook XSL
cp "$PYDOC"/{struct,logging,codecs,datetime}.html "$OUT/python/"          # Sphinx
cp /usr/share/R/doc/manual/R-intro.html "$OUT/r/"                         # makeinfo, one page
cp /usr/share/cppreference/doc/html/en/cpp/language/types.html "$OUT/cppreference/"
cp /usr/share/doc/sqlite3/datatype3.html "$OUT/sqlite/"
# Office and e-book files as pandoc writes them from the PostgreSQL manual's pages.
pandoc "$PGDOC/datatype-datetime.html" -o "$OUT/converted/datetime-types.docx"
pandoc "$PGDOC/datatype-net-types.html" -o "$OUT/converted/network-types.odt"
pandoc "$PGDOC/datatype-geometric.html" -o "$OUT/converted/geometric-types.epub"

rm -f "$DB" "$DB"-wal "$DB"-shm
$CRAG ingest --db "$DB" "$OUT"
