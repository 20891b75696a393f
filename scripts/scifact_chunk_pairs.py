"""SciFact claims against whole retrieved chunks: (query, passage, label) pairs at the grain
the cascade grades.

Rationale sentences (`scifact_rationale_pairs.py`) teach which sentence bears on a claim, but
the cascade grades retrieved chunks of ~200 tokens, several sentences each: an evaluator
trained on sentences alone scores whole chunks low and separates them no better than the
embedder's cosine. These pairs are what the grader sees. For every train claim:

- its top-k hybrid hits in a corpus ingested from SciFact (retrieval-mined neighbours), and
- every chunk of its evidence abstracts,

each labelled 1 when the chunk overlaps the character span of a rationale sentence of one of
the claim's evidence abstracts, else 0. Same-abstract chunks without a rationale and retrieved
neighbours are the hard negatives; every hit of a NOT ENOUGH INFO claim is a negative, its
cited abstracts included. Rationales are located by SciFact's sentence indices into
`sentences.sentence_spans(join_continuations=False)`, the splitting that reproduces them (an
index past the last sentence stops the script, as in `scifact_rationale_pairs.py`).

Claims are split the way the trainer splits its human units (`training.data.is_validation`
of `human_unit(claim)`): the claims whose chunk pairs go to `--heldout` are exactly those
whose rationale-sentence pairs the trainer holds out for validation, so the held-out file
measures chunk-level ROC-AUC (and fits the calibration) on claims never trained on.

    crag-edge ingest --db scifact.db --format beir ../shared/data/scifact/corpus.jsonl
    python scripts/scifact_chunk_pairs.py --db scifact.db --data ../shared/data/scifact \\
        --out chunks.jsonl --heldout heldout_chunks.jsonl

SciFact: CC BY 4.0 (claims) / ODC-By 1.0 (abstracts), Wadden et al. 2020.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from crag_edge.engine import Engine
from crag_edge.evaluation.pairs import Pair, write_pairs
from crag_edge.sentences import sentence_spans
from crag_edge.store import Corpus
from crag_edge.training.data import human_unit, is_validation
from crag_edge.types import Chunk, Hit

_INDEX = re.compile(r"\d+")
BEIR_PREFIX = "beir:"
Span = tuple[int, int]


class ClaimDataError(ValueError):
    """The corpus does not fit the claims: an evidence abstract is missing, or a rationale
    index points past the abstract's last sentence."""


def read_claims(path: Path) -> dict[str, dict[str, set[int]]]:
    """Each train claim with its evidence: abstract id -> rationale sentence indices (empty
    for a NOT ENOUGH INFO claim). A claim with several evidence abstracts spans rows."""
    claims: dict[str, dict[str, set[int]]] = {}
    with path.open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            evidence = claims.setdefault(row["claim"], {})
            if row["evidence_doc_id"]:
                indices = {int(i) for i in _INDEX.findall(row["evidence_sentences"])}
                evidence.setdefault(row["evidence_doc_id"], set()).update(indices)
    return claims


def rationale_spans(text: str, indices: set[int]) -> list[Span]:
    """Character spans in `text` of the sentences SciFact's indices name."""
    sentences = sentence_spans(text, join_continuations=False)
    if indices and max(indices) >= len(sentences):
        raise ClaimDataError(f"index {max(indices)} of {len(sentences)} sentences")
    return [sentences[i] for i in sorted(indices)]


def rationale_label(chunk: Chunk, rationales: dict[str, list[Span]]) -> int:
    """1 when the chunk overlaps a rationale sentence of its own abstract, else 0."""
    spans = rationales.get(chunk.source, [])
    return int(any(start < chunk.end and chunk.start < end for start, end in spans))


def abstract_label(chunk: Chunk, rationales: dict[str, list[Span]]) -> int:
    """1 when the chunk belongs to an evidence abstract of the claim, else 0: SciFact's own
    unit of evidence is the abstract (`evidence_doc_id`), and a chunk of it describes the
    study the claim is about even where it holds no rationale sentence."""
    return int(bool(rationales.get(chunk.source)))


Labeller = Callable[[Chunk, dict[str, list[Span]]], int]
LABELLERS: dict[str, Labeller] = {"rationale": rationale_label, "abstract": abstract_label}


def claim_pairs(
    claim: str,
    hits: Sequence[Chunk],
    evidence_chunks: Sequence[Chunk],
    rationales: dict[str, list[Span]],
    label: Labeller = rationale_label,
) -> list[Pair]:
    """The claim's hits, then the rest of its evidence abstracts' chunks, each chunk once."""
    seen: set[int] = set()
    pairs = []
    for chunk in [*hits, *evidence_chunks]:
        if chunk.chunk_id not in seen:
            seen.add(chunk.chunk_id)
            pairs.append(Pair(claim, chunk.text, label(chunk, rationales)))
    return pairs


def chunks_by_source(corpus: Corpus) -> dict[str, list[Chunk]]:
    """Every chunk of the corpus grouped by document source, in document order."""
    grouped: dict[str, list[Chunk]] = {}
    chunks = corpus.get_chunks(corpus.chunk_ids())
    for chunk in sorted(chunks.values(), key=lambda c: (c.source, c.ordinal)):
        grouped.setdefault(chunk.source, []).append(chunk)
    return grouped


def all_pairs(
    claims: dict[str, dict[str, set[int]]],
    corpus: Corpus,
    search: Callable[[str], list[Hit]],
    label: Labeller = rationale_label,
    heldout_hits_only: bool = False,
) -> tuple[list[Pair], list[Pair]]:
    """(train pairs, held-out pairs) of every claim. With `heldout_hits_only` a held-out
    claim keeps only its retrieved hits: what the cascade grades in use."""
    grouped = chunks_by_source(corpus)
    train: list[Pair] = []
    heldout: list[Pair] = []
    for claim, evidence in claims.items():
        rationales: dict[str, list[Span]] = {}
        evidence_chunks: list[Chunk] = []
        for doc_id, indices in evidence.items():
            source = BEIR_PREFIX + doc_id
            if source not in grouped:
                raise ClaimDataError(f"evidence abstract {doc_id} is not in {corpus.path}")
            text = corpus.document_text(grouped[source][0].doc_id)
            try:
                rationales[source] = rationale_spans(text, indices)
            except ClaimDataError as exc:
                raise ClaimDataError(f"abstract {doc_id}: {exc}") from None
            evidence_chunks.extend(grouped[source])
        hits = [hit.chunk for hit in search(claim)]
        if is_validation(human_unit(claim)):
            extra = [] if heldout_hits_only else evidence_chunks
            heldout.extend(claim_pairs(claim, hits, extra, rationales, label))
        else:
            train.extend(claim_pairs(claim, hits, evidence_chunks, rationales, label))
    return train, heldout


def _summary(name: str, pairs: Sequence[Pair]) -> str:
    claims = len({p.query for p in pairs})
    positives = sum(p.label for p in pairs)
    return f"{name}: {len(pairs)} pairs ({positives} relevant) from {claims} claims"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="corpus ingested from SciFact")
    parser.add_argument("--data", type=Path, required=True, help="the scifact data folder")
    parser.add_argument("--out", type=Path, required=True, help="train-claim pairs JSONL")
    parser.add_argument("--heldout", type=Path, required=True, help="held-out pairs JSONL")
    parser.add_argument("--top-k", type=int, default=10, help="hits per claim")
    parser.add_argument(
        "--relevance",
        choices=sorted(LABELLERS),
        default="rationale",
        help="relevant: a chunk holding a rationale sentence, or any chunk of an evidence abstract",
    )
    parser.add_argument(
        "--heldout-hits-only",
        action="store_true",
        help="held-out claims keep only their retrieved hits, not every evidence chunk",
    )
    args = parser.parse_args()
    claims = read_claims(args.data / "claims_train.csv")
    with Engine.open(args.db, readonly=True) as engine:
        try:
            train, heldout = all_pairs(
                claims,
                engine.corpus,
                lambda claim: engine.search(claim, mode="hybrid", top_k=args.top_k),
                LABELLERS[args.relevance],
                args.heldout_hits_only,
            )
        except ClaimDataError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    write_pairs(train, args.out)
    write_pairs(heldout, args.heldout)
    print(_summary("train", train))
    print(_summary("held out", heldout))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
