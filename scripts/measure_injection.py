"""How often documentation that addresses no model is read as addressing one
(`grading.injection`): every paragraph of the given files (HTML tags dropped, split at blank
lines; in a JSON Lines or TSV file, every line) is matched, and each match printed.

    python scripts/measure_injection.py /usr/share/doc/git-doc/*.html \
        /usr/share/doc/sqlite3/*.html sample_corpus/* docs/*.md \
        ../shared/data/scifact/corpus.jsonl ../shared/data/climate_fever/climate-fever-dev.jsonl \
        ../shared/data/wikiqa/WikiQA-dev.tsv
"""

from __future__ import annotations

import argparse
import html
import re
from pathlib import Path

from crag_edge.grading.injection import addresses_model

TAG = re.compile(r"<[^>]+>")
PARAGRAPH = re.compile(r"\n\s*\n")
LINE_FILES = (".jsonl", ".tsv")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", type=Path, nargs="+")
    args = parser.parse_args()
    paragraphs = matched = 0
    for path in args.files:
        text = html.unescape(TAG.sub(" ", path.read_text(encoding="utf-8", errors="replace")))
        pieces = text.splitlines() if path.suffix in LINE_FILES else PARAGRAPH.split(text)
        for paragraph in pieces:
            paragraphs += 1
            phrase = addresses_model(paragraph)
            if phrase is not None:
                matched += 1
                print(f"{path.name}: {phrase!r} in {' '.join(paragraph.split())[:160]}")
    print(
        f"{len(args.files)} files, {paragraphs} paragraphs, {matched} read as addressing the model"
    )


if __name__ == "__main__":
    main()
