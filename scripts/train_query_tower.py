"""Train the query-tower evaluator: passages read by the embedder, only the query side learns.

The segment scorer (`crag-edge evaluator train`) fine-tunes one encoder that reads both texts,
so every chunk is read twice at ingest: once by the embedder for retrieval, once by the
evaluator for grading. Here the passage half is the embedder itself, frozen: each training
passage is embedded once, by the runtime embedder and exactly as ingest embeds it (a corpus
chunk with its title first), and only the query half (MiniLM's six layers) and the
weighted-cosine head train against those vectors. At run time a chunk's reading is then
the retrieval vector the corpus already stores, and the evaluator's `config.json` says so
(`passage_reader`). Training needs no passage forward pass, so a full epoch over thousands
of chunk pairs takes minutes on two cores.

The loss is BCE on the labels: the head's probabilities are what the cascade thresholds.

    python scripts/scifact_rationale_pairs.py --data ../shared/data/scifact --out rationale.jsonl
    python scripts/scifact_chunk_pairs.py --db subset.db --data ../shared/data/scifact \\
        --out chunks.jsonl --heldout heldout.jsonl --relevance abstract --heldout-hits-only
    python scripts/train_query_tower.py --db subset.db --train rationale.jsonl chunks.jsonl \\
        --heldout heldout.jsonl --out query-tower
    python scripts/ship_evaluator.py query-tower/release --model-id crag-edge-evaluator-scifact

Pairs whose query is in `--heldout` are never trained on (SciFact's held-out claims), so the
held-out ROC-AUC in the report measures claims the model never saw.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import shlex
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.evaluation.pairs import Pair, read_pairs
from crag_edge.grading import fit_platt
from crag_edge.models.manifest import load_manifest
from crag_edge.models.onnx_session import pad_batch, plain_tokenizer
from crag_edge.models.provision import EMBEDDER_ONNX_INT8, model_path
from crag_edge.models.registry import load_embedder
from crag_edge.models.segment_scorer import (
    PASSAGE_READER,
    OnnxSegmentScorer,
    open_cross_encoder,
)
from crag_edge.training import export
from crag_edge.training.model import (
    SegmentScorer,
    from_pretrained,
    parameter_count,
    save_checkpoint,
    start_head_at,
)
from crag_edge.training.vocab import segment_pair_template
from crag_edge.types import Embedder, embedding_text

ARCHITECTURE = "query-tower"
QUERY_TOKENS = 128
CHECK_PAIRS = 64
SCORE_BATCH = 64
WARMUP_SHARE = 0.1
HEAD_LR = 1e-3  # the head has 385 parameters; the encoder's rate would barely move them
LICENSE = (
    "CC BY 4.0 (SciFact claims) and ODC-By 1.0 (SciFact abstracts); SciFact, Wadden et al. "
    "2020, allenai/scifact"
)


@dataclass
class Data:
    """Training and held-out pairs, their passages as the embedder reads them, and vectors."""

    train: list[Pair]
    heldout: list[Pair]
    vectors: dict[str, np.ndarray]
    origins: dict[str, int]  # training pairs per labels file
    corpus_chunks: int  # chunks of the corpus the chunk pairs came from


def titled_passages(db: Path, settings: Settings) -> dict[str, str]:
    """chunk text -> what the embedder read of it at ingest (title first)."""
    with Engine.open(db, settings, readonly=True) as engine:
        chunks = engine.corpus.get_chunks(engine.corpus.chunk_ids())
    return {c.text: embedding_text(c.title, c.text) for c in chunks.values()}


def load_data(args: argparse.Namespace, settings: Settings, embedder: Embedder) -> Data:
    titled = titled_passages(args.db, settings)

    def read(paths: Sequence[Path]) -> list[Pair]:
        pairs = [p for path in paths for p in read_pairs(path)]
        return [Pair(p.query, titled.get(p.passage, p.passage), p.label) for p in pairs]

    heldout = read(args.heldout)
    unseen = {p.query for p in heldout}
    files = {path.name: [p for p in read([path]) if p.query not in unseen] for path in args.train}
    train = [p for pairs in files.values() for p in pairs]
    texts = sorted({p.passage for p in train + heldout})
    print(f"embedding {len(texts)} passages", file=sys.stderr, flush=True)
    vectors = dict(zip(texts, embedder.embed(texts), strict=True))
    origins = {name: len(pairs) for name, pairs in files.items()}
    return Data(train, heldout, vectors, origins, len(titled))


class QueryTower:
    """A segment scorer of which only the query reading and the head are used and trained."""

    def __init__(self, base_dir: Path, seed: int) -> None:
        model = from_pretrained(
            base_dir,
            layers=6,
            vocab_rows=None,
            max_positions=256,
            seed=seed,
            architecture="segment",
        )
        assert isinstance(model, SegmentScorer)
        self.model = model
        self.tokenizer = plain_tokenizer(base_dir / "tokenizer.json")
        self.tokenizer.enable_truncation(QUERY_TOKENS)

    def read(self, queries: Sequence[str]) -> torch.Tensor:
        feeds = pad_batch(self.tokenizer.encode_batch(list(queries)))
        return self.model.read_query(
            torch.from_numpy(feeds["input_ids"]), torch.from_numpy(feeds["attention_mask"])
        )

    def logits(self, pairs: Sequence[Pair], vectors: dict[str, np.ndarray]) -> torch.Tensor:
        passages = torch.from_numpy(np.stack([vectors[p.passage] for p in pairs]))
        return self.model.head(self.read([p.query for p in pairs]), passages)

    def predict(self, pairs: Sequence[Pair], vectors: dict[str, np.ndarray]) -> np.ndarray:
        self.model.eval()
        with torch.no_grad():
            parts = [
                self.logits(pairs[i : i + SCORE_BATCH], vectors).numpy()
                for i in range(0, len(pairs), SCORE_BATCH)
            ]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.float32)


def train(tower: QueryTower, data: Data, args: argparse.Namespace) -> dict[str, Any]:
    """AdamW, linear warm-up then linear decay; BCE (+ in-batch contrastive)."""
    cosine = tower.predict(data.train[:2000], data.vectors)  # untrained head = plain cosine
    start = fit_platt(cosine, [float(p.label >= 0.5) for p in data.train[:2000]])
    start_head_at(tower.model, start.a, start.b)
    encoder = [p for n, p in tower.model.named_parameters() if not n.startswith("head.")]
    optimizer = torch.optim.AdamW(
        [
            {"params": encoder, "lr": args.lr},
            {"params": tower.model.head.parameters(), "lr": HEAD_LR},
        ],
        weight_decay=0.01,
    )
    total = max(1, int(len(data.train) * args.epochs / args.batch))
    rng = random.Random(args.seed)
    order: list[int] = []
    losses: list[float] = []
    started = time.monotonic()
    tower.model.train()
    for step in range(1, total + 1):
        if len(order) < args.batch:
            order += rng.sample(range(len(data.train)), len(data.train))
        batch, order = [data.train[i] for i in order[: args.batch]], order[args.batch :]
        warm = step / (WARMUP_SHARE * total)
        scale = warm if warm < 1 else (total - step) / ((1 - WARMUP_SHARE) * total)
        for group, base in zip(optimizer.param_groups, (args.lr, HEAD_LR), strict=True):
            group["lr"] = base * max(scale, 0.0)
        loss = F.binary_cross_entropy_with_logits(
            tower.logits(batch, data.vectors), torch.tensor([float(p.label) for p in batch])
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 50 == 0 or step == total:
            print(f"step {step}/{total} loss {np.mean(losses[-50:]):.4f}", file=sys.stderr)
    tail = losses[-50:]
    return {
        "steps_done": total,
        "total_steps": total,
        "planned_steps": total,
        "seconds": round(time.monotonic() - started, 1),
        "resumed_from": 0,
        "complete": True,
        "final_loss": round(float(np.mean(tail)), 4),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="corpus the chunk pairs came from")
    parser.add_argument("--train", type=Path, nargs="+", required=True)
    parser.add_argument("--heldout", type=Path, nargs="+", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--model-id", default="crag-edge-evaluator-scifact")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(2)
    settings = Settings.load()
    embedder = load_embedder(settings.models)
    base_dir = model_path(
        settings.models.model_dir, load_manifest(settings.models.model_dir).get(embedder.model_id)
    )
    data = load_data(args, settings, embedder)
    tower = QueryTower(base_dir, args.seed)
    trained = train(tower, data, args)
    report = release(tower, data, trained, args, embedder, base_dir)
    print(json.dumps(report["checks"], indent=2))
    return 0


def release(
    tower: QueryTower,
    data: Data,
    trained: dict[str, Any],
    args: argparse.Namespace,
    embedder: Embedder,
    base_dir: Path,
) -> dict[str, Any]:
    """Checkpoint → ONNX fp32 + int8 → release folder with its model card and report."""
    tower.model.config[PASSAGE_READER] = embedder.model_id
    tokenizer_doc = segment_pair_template(
        json.loads((base_dir / "tokenizer.json").read_text(encoding="utf-8"))
    )
    checkpoint = save_checkpoint(tower.model, tokenizer_doc, args.out / "checkpoint")
    graphs = export.export_onnx(checkpoint, args.out)
    # The runtime finds an evaluator's passage reader in the config beside its graph.
    shutil.copyfile(checkpoint / "config.json", args.out / "config.json")
    verified = checks(tower, data, graphs, checkpoint / "tokenizer.json", embedder)
    report = describe(tower, data, trained, args, embedder, graphs, verified)
    card = args.out / export.CARD
    card.write_text(export.model_card(report), encoding="utf-8")
    files = {
        EMBEDDER_ONNX_INT8: graphs[1],
        "tokenizer.json": checkpoint / "tokenizer.json",
        "config.json": checkpoint / "config.json",
        export.CARD: card,
    }
    export.release(args.out, files)
    (args.out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def checks(
    tower: QueryTower,
    data: Data,
    graphs: tuple[Path, Path],
    tokenizer: Path,
    embedder: Embedder,
) -> dict[str, Any]:
    """The graphs against the trained model (through the runtime, passages read by the
    embedder), the held-out ROC-AUC of both, and the int8 graph's latency."""
    sample = data.heldout[:CHECK_PAIRS]
    reference = tower.predict(sample, data.vectors)
    fp32, int8 = graphs
    labels = [p.label for p in data.heldout]
    return {
        "pairs_checked": len(sample),
        "onnx_fp32_max_abs_diff": export.agreement(
            reference, runtime_logits(fp32, tokenizer, sample, data, embedder)
        ),
        "onnx_int8_max_abs_diff": export.agreement(
            reference, runtime_logits(int8, tokenizer, sample, data, embedder)
        ),
        "validation_auc_torch": export.auc(tower.predict(data.heldout, data.vectors), labels),
        "validation_auc_int8": export.auc(
            runtime_logits(int8, tokenizer, data.heldout, data, embedder), labels
        ),
        "latency_ms_20_pairs": export.latency_ms(
            int8, tokenizer, sample[0].query, [p.passage for p in sample[:20]], embedder
        ),
    }


def runtime_logits(
    graph: Path, tokenizer: Path, pairs: Sequence[Pair], data: Data, embedder: Embedder
) -> np.ndarray:
    """Logits of the runtime scorer over these pairs, passages read from `data.vectors`."""
    scorer = open_cross_encoder(graph, tokenizer, "check", threads=2, embedder=embedder)
    assert isinstance(scorer, OnnxSegmentScorer), f"{graph} is not a segment graph"
    out = np.empty(len(pairs), dtype=np.float32)
    for row, pair in enumerate(pairs):
        reading = scorer.readings_of([pair.passage], data.vectors[pair.passage][None])
        p = np.clip(scorer.score_encoded(pair.query, reading).scores[0], 1e-7, 1 - 1e-7)
        out[row] = np.log(p / (1 - p))
    return out


def describe(
    tower: QueryTower,
    data: Data,
    trained: dict[str, Any],
    args: argparse.Namespace,
    embedder: Embedder,
    graphs: tuple[Path, Path],
    verified: dict[str, Any],
) -> dict[str, Any]:
    """The model card's source: what was trained, on what, how, and how it checked."""
    config = tower.model.config
    return {
        "model_id": args.model_id,
        "command": "python scripts/train_query_tower.py " + shlex.join(sys.argv[1:]),
        "data_license": LICENSE,
        "data": {
            "db": args.db.name,
            "chunks": data.corpus_chunks,
            "labels_file": ", ".join(p.name for p in args.train),
            "llm": "none (human labels only: SciFact's rationales and evidence abstracts)",
            "pairs": len(data.train) + len(data.heldout),
            "train_pairs": len(data.train),
            "validation_pairs": len(data.heldout),
            "complete": True,
            "origins": data.origins,
        },
        "training": {
            "base_model": embedder.model_id,
            "architecture": ARCHITECTURE,
            "layers": config["num_hidden_layers"],
            "vocab_size": config["vocab_size"],
            "max_positions": config["max_position_embeddings"],
            "parameters": parameter_count(tower.model),
            "learning_rate": args.lr,
            "batch_size": args.batch,
            "max_length": QUERY_TOKENS,
            "epochs": args.epochs,
            "threads": 2,
            "seed": args.seed,
            "torch": torch.__version__,
            "python": platform.python_version(),
            **trained,
        },
        "size_bytes": {"fp32": graphs[0].stat().st_size, "int8": graphs[1].stat().st_size},
        "checks": verified,
    }


if __name__ == "__main__":
    raise SystemExit(main())
