"""How much of SciFact's rationale evidence the answer's context keeps at each token budget.

The answer's first word waits for the model to read its whole prompt (~90 tokens/s for
Qwen2.5-1.5B on two cores), so the context's size is the first word's cost. For each train
claim the corrective loop runs once (the cheap tiers: signals and the evaluator; no LLM)
and its kept chunks are refined again at every budget of `--budgets` (`context_budget_tokens`,
counted in the embedder's tokens as refinement counts them). A claim's evidence is kept when
a rationale sentence of a gold abstract (SciFact's sentence index) appears in the context: its
first 60 characters inside a context piece of that abstract. Reported per budget: claims whose
evidence the context holds, relative to the largest budget, and the context's mean tokens.

    python scripts/measure_context_budget.py --db subset.db --data ../shared/data/scifact \
        --limit 150 --json budgets.json
"""

from __future__ import annotations

import argparse
import csv
import json
import re
from pathlib import Path

from crag_edge.config import Settings
from crag_edge.correction.refine import refine
from crag_edge.engine import Engine
from crag_edge.sentences import sentence_spans
from crag_edge.types import Chunk

BUDGETS = (150, 200, 250, 300, 400, 600, 4096)
PREFIX_CHARS = 60
_INDEX = re.compile(r"\d+")


def rationales(data: Path) -> dict[str, dict[str, list[str]]]:
    """claim -> gold document id -> its rationale sentences' texts."""
    texts = {}
    with (data / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            texts[doc["_id"]] = doc["text"]
    found: dict[str, dict[str, list[str]]] = {}
    with (data / "claims_train.csv").open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            doc_id = row["evidence_doc_id"]
            if not doc_id:
                continue
            spans = sentence_spans(texts[doc_id], join_continuations=False)
            for i in map(int, _INDEX.findall(row["evidence_sentences"])):
                sentence = texts[doc_id][spans[i][0] : spans[i][1]]
                found.setdefault(row["claim"], {}).setdefault(doc_id, []).append(sentence)
    return found


def holds_evidence(pieces: list[tuple[str, str]], gold: dict[str, list[str]]) -> bool:
    """Whether a (source, text) piece of a gold abstract holds one of its rationales."""
    for source, text in pieces:
        doc_id = source.removeprefix("beir:")
        if any(s[:PREFIX_CHARS] in text for s in gold.get(doc_id, [])):
            return True
    return False


def measure(engine: Engine, claims: dict[str, dict[str, list[str]]], budgets: list[int]) -> dict:
    held = dict.fromkeys(budgets, 0)
    tokens = dict.fromkeys(budgets, 0)
    answered = 0

    def count(text: str) -> int:
        return len(engine.embedder.tokenizer.encode(text, add_special_tokens=False).ids)

    for claim, gold in claims.items():
        result = engine.query(claim)
        kept: dict[int, Chunk] = {h.chunk.chunk_id: h.chunk for h, g in result.hits if g.kept}
        if not result.context or not kept:
            continue
        answered += 1
        for budget in budgets:
            refined = refine(claim, list(kept.values()), engine.embedder, budget_tokens=budget)
            pieces = refined.pieces or [max(refined.scored, key=lambda s: s.score)]
            held[budget] += holds_evidence([(p.source, p.text) for p in pieces], gold)
            tokens[budget] += sum(count(p.text) for p in pieces)
    top = max(budgets)
    return {
        "claims": len(claims),
        "with_context": answered,
        "budgets": {
            str(b): {
                "evidence_held": held[b],
                "share_of_largest": round(held[b] / held[top], 4) if held[top] else None,
                "mean_context_tokens": round(tokens[b] / answered, 1) if answered else None,
            }
            for b in budgets
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="a SciFact corpus (read only)")
    parser.add_argument("--data", type=Path, required=True, help="the scifact data folder")
    parser.add_argument("--limit", type=int, default=150, help="first N claims")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument("--json", type=Path, default=None, help="write the numbers here")
    args = parser.parse_args()
    claims = dict(list(rationales(args.data).items())[: args.limit])
    budgets = [int(b) for b in args.budgets.split(",")]
    settings = Settings.load(grading_tiers=["signals", "cross_encoder"], rewrite_with_llm=False)
    with Engine.open(args.db, settings, readonly=True) as engine:
        report = measure(engine, claims, budgets)
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
