"""Train the support model: (sentence read after the one before it, passage) -> stated or not.

The pairs come from `scripts/support_pairs.py`. Whole corpora named by `--heldout-corpus`
are never trained on, nor SciFact's held-out claims (`is_validation(human_unit(claim))`,
the evaluator's split): they are the validation pairs the export is checked on. The model
is the evaluator trainer's `cross` architecture (joint attention over the pair, a classifier
on [CLS]), fine-tuned, exported and checked by the same code (`training.pipeline`).

    python scripts/train_support_model.py --pairs support-pairs.jsonl --heldout-corpus formats \\
        --out support-model --budget-minutes 35
    python scripts/ship_evaluator.py support-model/release --support
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import sys
import time
from pathlib import Path

from crag_edge.config import Settings
from crag_edge.models.support_model import MAX_LENGTH
from crag_edge.training.data import TrainPair
from crag_edge.training.export import CARD, RELEASE_DIR, model_card
from crag_edge.training.pipeline import (
    REPORT_FILE,
    LabelledPairs,
    NoEvents,
    TrainOptions,
    base_model,
    fit_and_release,
)
from crag_edge.training.support_data import is_heldout

MODEL_ID = "crag-edge-support"
LICENSE = (
    "base weights Apache-2.0 (all-MiniLM-L6-v2); training data: pairs made from Debian's "
    "sqlite3-doc (public domain) and git-doc (GPL-2.0) pages, crag-edge's own test documents, "
    "and SciFact (CC BY 4.0 claims, ODC-By 1.0 abstracts; Wadden et al. 2020, allenai/scifact)"
)
ABOUT = (
    "A model that reads (the sentence before, an answer's sentence; a passage) and scores\n"
    "whether the passage states the sentence (sigmoid of one logit): the support check's own\n"
    "model, int8, CPU. A passage is read in windows of whole sentences; its score is its best\n"
    "window's."
)


class Progress(NoEvents):
    """Stages and every 50th step on stderr, for a long run in the background."""

    def stage(self, name: str, total: int | None) -> None:
        print(f"{time.strftime('%H:%M:%S')} {name} ({total})", file=sys.stderr, flush=True)

    def update(self, completed: int, total: int | None = None) -> None:
        if completed % 50 == 0:
            print(f"{time.strftime('%H:%M:%S')} {completed}/{total}", file=sys.stderr, flush=True)

    def note(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)


def split(args: argparse.Namespace) -> LabelledPairs:
    """Training pairs, and validation pairs: the held-out corpora and SciFact's held-out
    claims (at most `--max-validation`, drawn at random)."""
    rows = [json.loads(line) for line in args.pairs.open(encoding="utf-8")]
    pairs = [
        (TrainPair(r["query"], r["passage"], r["label"], r["origin"], r["unit"]), r["corpus"])
        for r in rows
    ]
    held = args.heldout_corpus
    train = [p for p, corpus in pairs if not is_heldout(corpus, p.unit, held)]
    validation = [p for p, corpus in pairs if is_heldout(corpus, p.unit, held)]
    random.Random(args.seed).shuffle(validation)
    passages = len({p.passage for p, _ in pairs})
    everything = [p for p, _ in pairs]
    return LabelledPairs(everything, train, validation[: args.max_validation], passages, True, None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=Path, required=True)
    parser.add_argument("--heldout-corpus", action="append", default=[])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-minutes", type=float, default=35.0)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--max-length", type=int, default=MAX_LENGTH)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--max-validation", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    args = parser.parse_args()
    started = time.monotonic()
    options = TrainOptions(
        db=args.pairs,
        out=args.out,
        labels=args.pairs,
        budget_minutes=args.budget_minutes,
        layers=args.layers,
        architecture="cross",
        llm_labels=False,
        epochs=args.epochs,
        batch_size=args.batch,
        learning_rate=args.lr,
        max_length=args.max_length,
        seed=args.seed,
        threads=args.threads,
        model_id=MODEL_ID,
        register=False,
        data_license=LICENSE,
        command="python scripts/train_support_model.py " + shlex.join(sys.argv[1:]),
    )
    settings = Settings.load()
    labels = split(args)
    args.out.mkdir(parents=True, exist_ok=True)
    deadline = started + args.budget_minutes * 60
    report = fit_and_release(
        settings, options, base_model(settings, options), labels, Progress(), deadline
    )
    report |= {"kind": "crag-edge support model", "about": ABOUT}
    report["data"]["llm"] = "none (every pair made by rule: crag_edge/training/support_data.py)"
    report["heldout_corpora"] = sorted(args.heldout_corpus)
    report["seconds_total"] = round(time.monotonic() - started, 1)
    (args.out / RELEASE_DIR / CARD).write_text(model_card(report), encoding="utf-8")
    (args.out / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report["checks"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
