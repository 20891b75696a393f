"""ROC-AUC of the support model on the labelled items, by corpus: as trained on rule-made
pairs only, and fine-tuned on the labelled items of the other corpora (one corpus left out
at a time, never its own items).

Each item of `docs/data/support-labels.jsonl` that carries its passage is read as the
runtime reads it (`SupportModel.scores`: "question [SEP] previous [SEP] sentence" against
each window of the passage, the best window's score), here by the trained torch model of
a `scripts/train_support_model.py` run (`--run`, its `checkpoint`). Fold by fold, a copy of
that model is trained on the other corpora's items mixed with as many of the run's own
training pairs (`--pairs`, the held-out corpora left out): every window of an item that is
not stated is a negative (no window states it, or states it as an answer); a stated item's
best window, as the model read it before, is its positive. The scores of all folds are
pooled for the overall AUC.

    python scripts/measure_support_folds.py --run build/support-model/model \\
        --pairs build/support-model/support-pairs.jsonl --heldout-corpus formats \\
        --labels docs/data/support-labels.jsonl --scores build/support-folds.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.numpy import load_file

from crag_edge.answer.support import claim_text
from crag_edge.grading.auc import roc_auc
from crag_edge.models.onnx_session import plain_tokenizer
from crag_edge.models.support_model import MAX_LENGTH, passage_windows, support_input
from crag_edge.training.data import TrainPair
from crag_edge.training.model import CrossEncoder
from crag_edge.training.pipeline import CHECKPOINT_DIR
from crag_edge.training.support_data import is_heldout
from crag_edge.training.trainer import TrainConfig, Trainer, encode, predict_logits


@dataclass(frozen=True)
class Item:
    """A labelled item as the model reads it: one query against each window of its passage."""

    corpus: str
    stated: bool
    label: str
    query: str
    windows: tuple[str, ...]

    def pairs(self, label: float) -> list[TrainPair]:
        return [TrainPair(self.query, w, label, self.label, self.corpus) for w in self.windows]


def read_items(path: Path) -> list[Item]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [
        Item(
            row["corpus"],
            row["stated"],
            row["label"],
            support_input(
                claim_text(row["sentence"]), claim_text(row["previous"]), row["question"]
            ),
            tuple(passage_windows(row["passage"])),
        )
        for row in rows
        if "passage" in row
    ]


def load_model(checkpoint: Path) -> CrossEncoder:
    config = json.loads((checkpoint / "config.json").read_text(encoding="utf-8"))
    model = CrossEncoder(config)
    tensors = load_file(str(checkpoint / "model.safetensors"))
    model.load_state_dict({k: torch.from_numpy(v) for k, v in tensors.items()})
    return model


class Reader:
    """Scores items with a model: each window's logit, and the item's best."""

    def __init__(self, checkpoint: Path) -> None:
        self.tokenizer = plain_tokenizer(checkpoint / "tokenizer.json")
        self.tokenizer.enable_truncation(MAX_LENGTH, strategy="longest_first")

    def windows(self, model: CrossEncoder, items: list[Item]) -> list[np.ndarray]:
        flat = [p for item in items for p in item.pairs(0.0)]
        logits = predict_logits(model, encode(self.tokenizer, flat))
        out, at = [], 0
        for item in items:
            out.append(logits[at : at + len(item.windows)])
            at += len(item.windows)
        return out


def fold_pairs(
    items: list[Item], before: list[np.ndarray], synthetic: list[TrainPair], rng: random.Random
) -> list[TrainPair]:
    """The items' training pairs (all windows of an unstated item, a stated item's best
    window), and as many rule-made pairs drawn at random."""
    pairs: list[TrainPair] = []
    for item, logits in zip(items, before, strict=True):
        if item.stated:
            best = int(np.argmax(logits))
            pairs.append(TrainPair(item.query, item.windows[best], 1.0, item.label, item.corpus))
        else:
            pairs.extend(item.pairs(0.0))
    pairs.extend(rng.sample(synthetic, min(len(synthetic), len(pairs))))
    rng.shuffle(pairs)
    return pairs


def fine_tune(
    args: argparse.Namespace, pairs: list[TrainPair], reader: Reader, state_dir: Path
) -> tuple[CrossEncoder, dict[str, Any]]:
    model = load_model(args.run / CHECKPOINT_DIR)
    config = TrainConfig(
        batch_size=args.batch,
        learning_rate=args.lr,
        epochs=args.epochs,
        max_length=MAX_LENGTH,
        seed=args.seed,
        checkpoint_every_s=1e9,
    )
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "train_state.pt").unlink(missing_ok=True)
    trainer = Trainer(
        model,
        encode(reader.tokenizer, pairs),
        [p.label for p in pairs],
        config,
        state_dir,
        f"fold-{state_dir.name}",
    )
    result = trainer.train(time.monotonic() + args.fold_minutes * 60)
    return model, {"pairs": len(pairs), "steps": result.steps_done, "loss": result.final_loss}


def auc(scores: list[float], labels: list[bool]) -> float | None:
    if len(set(labels)) < 2:
        return None
    return round(roc_auc(scores, [int(x) for x in labels]), 3)


def by_corpus(items: list[Item], scores: list[float]) -> dict[str, Any]:
    table: dict[str, Any] = {
        "all": {"items": len(items), "auc": auc(scores, [i.stated for i in items])}
    }
    for corpus in sorted({i.corpus for i in items}):
        rows = [(s, i) for s, i in zip(scores, items, strict=True) if i.corpus == corpus]
        table[corpus] = {
            "items": len(rows),
            "stated": sum(i.stated for _, i in rows),
            "auc": auc([s for s, _ in rows], [i.stated for _, i in rows]),
        }
    return table


def synthetic_pairs(args: argparse.Namespace) -> list[TrainPair]:
    rows = [json.loads(line) for line in args.pairs.open(encoding="utf-8")]
    return [
        TrainPair(r["query"], r["passage"], r["label"], r["origin"], r["unit"])
        for r in rows
        if not is_heldout(r["corpus"], r["unit"], args.heldout_corpus)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="a training run's folder")
    parser.add_argument("--pairs", type=Path, required=True)
    parser.add_argument("--heldout-corpus", action="append", default=[])
    parser.add_argument("--labels", type=Path, default=Path("docs/data/support-labels.jsonl"))
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--fold-minutes", type=float, default=8.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--scores", type=Path, help="write each item's scores here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    items = read_items(args.labels)
    reader = Reader(args.run / CHECKPOINT_DIR)
    before = reader.windows(load_model(args.run / CHECKPOINT_DIR), items)
    synthetic_only = [float(w.max()) for w in before]
    folded = list(synthetic_only)
    folds: dict[str, Any] = {}
    synthetic = synthetic_pairs(args)
    for corpus in sorted({i.corpus for i in items}):
        train = [n for n, i in enumerate(items) if i.corpus != corpus]
        test = [n for n, i in enumerate(items) if i.corpus == corpus]
        rng = random.Random(f"{args.seed}:{corpus}")
        pairs = fold_pairs([items[n] for n in train], [before[n] for n in train], synthetic, rng)
        model, folds[corpus] = fine_tune(args, pairs, reader, args.run / "folds" / corpus)
        for n, logits in zip(test, reader.windows(model, [items[n] for n in test]), strict=True):
            folded[n] = float(logits.max())
        print(corpus, folds[corpus], flush=True)
    report = {
        "synthetic_only": by_corpus(items, synthetic_only),
        "with_other_corpora_items": by_corpus(items, folded),
        "folds": folds,
    }
    if args.scores:
        lines = [
            json.dumps({"corpus": i.corpus, "label": i.label, "synthetic": s, "folded": f})
            for i, s, f in zip(items, synthetic_only, folded, strict=True)
        ]
        args.scores.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
