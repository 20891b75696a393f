"""Training pairs for the support model, from corpora at hand, without an LLM.

Recipes (`crag_edge/training/support_data.py`): each passage window's sentences as claims,
stated (as written or paraphrased by rule) against their window; MiniCheck's hard negative
(the window with the claim replaced by a sentence of the same length); typed errors (a
number, option, name, negation or condition changed; a quarter of the negatives at most);
the document's sentences next to the claim, as many words as its window; claims that point
back read after a sentence about something else; a claim asked under another claim's
question; table rows read alone with their headers. SciFact: a SUPPORT claim against its
rationale sentences (with their neighbours) is stated; the same window with the rationales
replaced by other sentences of the abstract, a CONTRADICT claim's rationales and a run of
the abstract's other sentences as long as the window are not. Every negative's passage is
as long as its positive's.

    python scripts/support_pairs.py --corpus git-doc=git-doc.db --corpus sqlite-doc=sqlite-doc.db \\
        --corpus formats=formats.db --tables sqlite-doc='/usr/share/doc/sqlite3/*.html' \\
        --scifact ../shared/data/scifact --out support-pairs.jsonl

Every pair names its `corpus` and `unit` (a document, a table row or a SciFact claim), so
`scripts/train_support_model.py` can hold a corpus out whole.
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import random
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict
from html.parser import HTMLParser
from pathlib import Path

from crag_edge.grading.auc import roc_auc
from crag_edge.models.support_model import support_input
from crag_edge.sentences import sentence_spans
from crag_edge.store.factory import open_corpus
from crag_edge.training.data import human_unit
from crag_edge.training.support_data import (
    QUESTION_SHARE,
    SCIFACT,
    Document,
    DocumentRecipes,
    SupportPair,
    Table,
    cap_typed,
    close_length,
    document,
    length_run,
    pseudo_question,
    table_pairs,
)

INDEX = re.compile(r"\d+")
MAX_CELL_WORDS = 12
MAX_WINDOW_SENTENCES = 3


def corpus_documents(name: str, db: str) -> list[Document]:
    """The corpus's documents, each as its chunks' windows in order."""
    corpus = open_corpus(db, readonly=True)
    chunks = corpus.get_chunks(corpus.chunk_ids())
    by_doc: dict[int, list[tuple[int, str]]] = {}
    for chunk in chunks.values():
        by_doc.setdefault(chunk.doc_id, []).append((chunk.ordinal, chunk.text))
    return [
        document(f"{name}:{doc_id}", name, [text for _, text in sorted(parts)])
        for doc_id, parts in sorted(by_doc.items())
    ]


class _Tables(HTMLParser):
    """The tables of an HTML page: header cells (<th>, or the first row), data rows, and the
    caption or the last heading before the table."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[Table] = []
        self._heading: list[str] = []
        self._in_heading = False
        self._caption: list[str] | None = None
        self._rows: list[tuple[bool, list[str]]] | None = None
        self._cell: list[str] | None = None
        self._header_cell = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("h1", "h2", "h3", "h4"):
            self._in_heading, self._heading = True, []
        elif tag == "table":
            self._rows, self._caption = [], []
        elif tag == "tr" and self._rows is not None:
            self._rows.append((False, []))
        elif tag in ("td", "th") and self._rows:
            self._cell, self._header_cell = [], tag == "th"

    def handle_endtag(self, tag: str) -> None:
        if tag in ("h1", "h2", "h3", "h4"):
            self._in_heading = False
        elif tag in ("td", "th") and self._cell is not None and self._rows:
            header, cells = self._rows[-1]
            cells.append(" ".join("".join(self._cell).split()))
            self._rows[-1] = (header or self._header_cell, cells)
            self._cell = None
        elif tag == "table" and self._rows is not None:
            self._close_table()

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        elif self._in_heading:
            self._heading.append(data)

    def _close_table(self) -> None:
        rows = [(h, cells) for h, cells in self._rows or [] if any(cells)]
        self._rows = None
        if len(rows) < 3 or not rows[0][0] or not 2 <= len(rows[0][1]) <= 8:
            return  # no header row of <th> cells, or not a table of facts
        headers, body = tuple(rows[0][1]), [tuple(cells) for _, cells in rows[1:]]
        body = [r for r in body if len(r) == len(headers)]
        if len(body) < 2 or any(len(c.split()) > MAX_CELL_WORDS for r in body for c in r):
            return
        caption = " ".join("".join(self._heading).split())
        self.tables.append(Table(caption, headers, tuple(body)))


def page_tables(path: Path) -> list[Table]:
    reader = _Tables()
    reader.feed(path.read_text(encoding="utf-8", errors="replace"))
    return reader.tables


def scifact_pairs(folder: Path, rng: random.Random) -> Iterator[SupportPair]:
    """Per claim with evidence: its rationale window (stated for SUPPORT, not for CONTRADICT),
    the window without its rationales, and a run of the abstract's other sentences."""
    abstracts = {}
    for line in (folder / "corpus.jsonl").open(encoding="utf-8"):
        doc = json.loads(line)
        text = doc["text"]
        abstracts[doc["_id"]] = [
            text[a:b] for a, b in sentence_spans(text, join_continuations=False)
        ]
    with (folder / "claims_train.csv").open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            if row["evidence_doc_id"] and row["evidence_label"]:
                indices = sorted({int(i) for i in INDEX.findall(row["evidence_sentences"])})
                sentences = abstracts[row["evidence_doc_id"]]
                yield from _claim_pairs(
                    row["claim"], row["evidence_label"], sentences, indices, rng
                )


def _claim_pairs(
    claim: str, label: str, sentences: list[str], indices: list[int], rng: random.Random
) -> Iterator[SupportPair]:
    """The rationale window, and as long as it (`close_length`): the window with each
    rationale replaced by another sentence of the abstract of about its length, and a run
    of the abstract's other sentences."""
    unit = human_unit(claim)
    first = max(0, indices[0] - 1)
    last = min(len(sentences), indices[-1] + 2, first + max(MAX_WINDOW_SENTENCES, len(indices)))
    window = [i for i in range(first, last)]
    if not set(indices) <= set(window):
        window = sorted(set(indices))
    question = pseudo_question(claim, rng) if rng.random() < QUESTION_SHARE else ""
    query = support_input(claim, "", question)
    passage = " ".join(sentences[i] for i in window)
    target = len(passage.split())
    stated = 1.0 if label == "SUPPORT" else 0.0
    yield SupportPair(query, passage, stated, f"scifact-{label.lower()}", unit, SCIFACT)
    rest = [sentences[i] for i in range(len(sentences)) if i not in window]
    replaced = _replaced(sentences, window, indices, rest, rng)
    if replaced and close_length(len(replaced.split()), target):
        yield SupportPair(query, replaced, 0.0, "scifact-removed", unit, SCIFACT)
    starts = list(range(len(rest)))
    rng.shuffle(starts)
    for start in starts:
        run = length_run(rest[start:], target)
        if run:
            yield SupportPair(query, " ".join(run), 0.0, "scifact-other", unit, SCIFACT)
            break


def _replaced(
    sentences: list[str], window: list[int], indices: list[int], rest: list[str], rng: random.Random
) -> str | None:
    """The window with each rationale sentence swapped for an unused sentence of the rest
    of the abstract of about its length, or None when the abstract has none."""
    unused = list(rest)
    rng.shuffle(unused)
    made = []
    for i in window:
        if i not in indices:
            made.append(sentences[i])
            continue
        words = len(sentences[i].split())
        fits = [s for s in unused if close_length(len(s.split()), words)]
        if not fits:
            return None
        made.append(fits[0])
        unused.remove(fits[0])
    return " ".join(made)


def parse_named(values: list[str], option: str) -> list[tuple[str, str]]:
    named = []
    for value in values:
        name, sep, where = value.partition("=")
        if not sep or not name or not where:
            raise SystemExit(f"{option} wants NAME=LOCATION, not {value!r}")
        named.append((name, where))
    return named


def make_pairs(args: argparse.Namespace) -> list[SupportPair]:
    rng = random.Random(args.seed)
    pairs: list[SupportPair] = []
    for name, db in parse_named(args.corpus, "--corpus"):
        recipes = DocumentRecipes(corpus_documents(name, db), args.seed)
        pairs.extend(recipes.pairs(args.per_window))
    for name, pattern in parse_named(args.tables, "--tables"):
        for path in sorted(glob.glob(pattern)):
            for t, table in enumerate(page_tables(Path(path))):
                key = f"{name}:{Path(path).stem}:table{t}"
                pairs.extend(table_pairs(table, name, key, rng))
    if args.scifact:
        pairs.extend(scifact_pairs(args.scifact, rng))
    return cap_typed(pairs, rng)


def length_auc(pairs: list[SupportPair]) -> dict[str, float]:
    """How well a passage's word count alone tells stated pairs, by corpus: near 0.5 when
    the negatives' passages are as long as the positives'."""
    found = {}
    for corpus in ["all", *sorted({p.corpus for p in pairs})]:
        chosen = [p for p in pairs if corpus in ("all", p.corpus)]
        labels = [int(p.label >= 0.5) for p in chosen]
        if len(set(labels)) == 2:
            words = [float(len(p.passage.split())) for p in chosen]
            found[corpus] = round(roc_auc(words, labels), 3)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", default=[], help="NAME=corpus.db")
    parser.add_argument("--tables", action="append", default=[], help="NAME='pages/*.html'")
    parser.add_argument("--scifact", type=Path, help="the SciFact data folder")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--per-window", type=int, default=1, help="claims per passage window")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    pairs = make_pairs(args)
    with args.out.open("w", encoding="utf-8") as out:
        for pair in pairs:
            out.write(json.dumps(asdict(pair), ensure_ascii=False) + "\n")
    counts = Counter((p.corpus, p.origin, int(p.label)) for p in pairs)
    print(json.dumps({f"{c} {o} {lab}": n for (c, o, lab), n in sorted(counts.items())}, indent=1))
    print(json.dumps({"passage words alone, ROC-AUC of stated": length_auc(pairs)}, indent=1))
    print(f"{len(pairs)} pairs, {sum(p.label >= 0.5 for p in pairs)} stated -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
