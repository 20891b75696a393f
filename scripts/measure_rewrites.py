"""Which keyword queries from the local LLM keep no word of their question? (docs/correction.md)

    python scripts/measure_rewrites.py --questions docs/data/git-doc-questions.jsonl \
        --claims ../shared/data/scifact/claims_train.csv --limit 40

Each question (the `question` of every JSON line, then the first `--limit` SciFact claims)
is rewritten by the default LLM with the AMBIGUOUS/INCORRECT rewrite prompt; a rewrite that
keeps no content word of its question (`expand.shares_a_term`) is the model's guess at the
answer, which `rewrite` replaces by the question's content words.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

from crag_edge.config import Settings
from crag_edge.correction.expand import REWRITE_PROMPT, shares_a_term
from crag_edge.models.llm import load_llm


def questions(path: Path | None, claims: Path | None, limit: int) -> list[str]:
    asked = []
    if path is not None:
        lines = path.read_text(encoding="utf-8").splitlines()
        asked += [json.loads(line)["question"] for line in lines if line.strip()]
    if claims is not None:
        with claims.open(encoding="utf-8", newline="") as handle:
            asked += list(dict.fromkeys(row["claim"] for row in csv.DictReader(handle)))[:limit]
    return asked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=Path, help="JSON lines with a `question` each")
    parser.add_argument("--claims", type=Path, help="SciFact claims_*.csv")
    parser.add_argument("--limit", type=int, default=40, help="claims taken from --claims")
    args = parser.parse_args()
    llm = load_llm(Settings.load().models)
    asked = questions(args.questions, args.claims, args.limit)
    guesses = 0
    for question in asked:
        reply = llm.chat(
            [{"role": "system", "content": REWRITE_PROMPT}, {"role": "user", "content": question}],
            max_tokens=32,
        )
        kept = shares_a_term(reply.text, question)
        guesses += not kept
        print(f"{'    ' if kept else 'NONE'} {question[:70]} => {reply.text.strip()[:70]}")
    print(f"{guesses} of {len(asked)} rewrites keep no word of their question")


if __name__ == "__main__":
    main()
