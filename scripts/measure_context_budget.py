"""How much of SciFact's rationale evidence the answer's context keeps at each token budget.

The answer's first word waits for the model to read its whole prompt (~90 tokens/s for
Qwen2.5-1.5B on two cores), so the context's size is the first word's cost. For each train
claim the corrective loop runs once (the cheap tiers: signals and the evaluator; no LLM)
and its kept chunks are refined again at every budget of `--budgets` (`context_budget_tokens`,
counted in the embedder's tokens as refinement counts them). A claim's evidence is kept when
a rationale sentence of a gold abstract (SciFact's sentence index) appears in the context: its
first 60 characters inside a context piece of that abstract. Reported per budget: claims whose
evidence the context holds, relative to the largest budget, and the context's mean tokens
(texts and each document's title once, as the budget counts them); with `--prompt-tokens`,
also the answer prompt's tokens the default LLM evaluates before its first word (mean, max,
and how many exceed 270, about 3 s at ~11 ms a token on two cores).

    python scripts/measure_context_budget.py --db subset.db --data ../shared/data/scifact \
        --limit 150 --prompt-tokens --json budgets.json
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from crag_edge.answer.generation import answer_messages
from crag_edge.config import Settings
from crag_edge.correction.refine import ContextBudget, embedder_tokens, refine
from crag_edge.engine import Engine
from crag_edge.models.llm import LlamaRuntime, load_llm
from crag_edge.sentences import sentence_spans
from crag_edge.types import Span

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


class PromptTokens:
    """Tokens of the answer prompt the model evaluates before its first word, in the LLM's own
    tokens: the whole chat prompt less the fixed part a snapshot holds (`models/llm.py`)."""

    def __init__(self, llm: LlamaRuntime) -> None:
        self.llm = llm

    def __call__(self, question: str, pieces: list[Span]) -> int:
        context = [replace(p, n=n, score=0) for n, p in enumerate(pieces, start=1)]
        return self.llm.evaluated_tokens(answer_messages(question, context))


def context_tokens(pieces: list[Span], count: Callable[[str], int]) -> int:
    """What the budget counts of the context: texts, and each document's title once."""
    spent = ContextBudget(count)
    for piece in pieces:
        spent.spend(piece)
    return spent.spent


@dataclass
class BudgetTally:
    held: int = 0
    context_tokens: int = 0
    prompt_tokens: list[int] = field(default_factory=list)

    def report(self, answered: int, largest_held: int) -> dict[str, Any]:
        prompts = sorted(self.prompt_tokens)
        return {
            "evidence_held": self.held,
            "share_of_largest": round(self.held / largest_held, 4) if largest_held else None,
            "mean_context_tokens": round(self.context_tokens / answered, 1) if answered else None,
            **(
                {
                    "mean_prompt_tokens": round(statistics.mean(prompts), 1),
                    "max_prompt_tokens": prompts[-1],
                    "prompts_over_270": sum(n > 270 for n in prompts),
                }
                if prompts
                else {}
            ),
        }


def measure(
    engine: Engine,
    claims: dict[str, dict[str, list[str]]],
    budgets: list[int],
    prompt_tokens: PromptTokens | None = None,
) -> dict:
    tallies = {budget: BudgetTally() for budget in budgets}
    answered = 0
    for claim, gold in claims.items():
        result = engine.query(claim)
        kept = [(h.chunk, g.score) for h, g in result.hits if g.kept]
        if not result.context or not kept:
            continue
        answered += 1
        anchor = max(kept, key=lambda pair: pair[1])[0]
        for budget, tally in tallies.items():
            chunks = [chunk for chunk, _ in kept]
            refined = refine(claim, chunks, engine.embedder, budget_tokens=budget, anchor=anchor)
            pieces = refined.pieces
            tally.held += holds_evidence([(p.source, p.text) for p in pieces], gold)
            tally.context_tokens += context_tokens(pieces, embedder_tokens(engine.embedder))
            if prompt_tokens is not None:
                tally.prompt_tokens.append(prompt_tokens(claim, pieces))
    largest = tallies[max(budgets)].held
    return {
        "claims": len(claims),
        "with_context": answered,
        "budgets": {str(b): tallies[b].report(answered, largest) for b in budgets},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="a SciFact corpus (read only)")
    parser.add_argument("--data", type=Path, required=True, help="the scifact data folder")
    parser.add_argument("--limit", type=int, default=150, help="first N claims")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument(
        "--prompt-tokens",
        action="store_true",
        help="also count the answer prompt's evaluated tokens with the default LLM's tokenizer",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the numbers here")
    args = parser.parse_args()
    claims = dict(list(rationales(args.data).items())[: args.limit])
    budgets = [int(b) for b in args.budgets.split(",")]
    settings = Settings.load(grading_tiers=["signals", "cross_encoder"], rewrite_with_llm=False)
    counter = PromptTokens(load_llm(settings.models)) if args.prompt_tokens else None
    with Engine.open(args.db, settings, readonly=True) as engine:
        report = measure(engine, claims, budgets, counter)
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
