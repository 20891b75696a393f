"""Fine-tuning on CPU: BCE on (soft) labels, a wall-clock budget and resumable checkpoints.

Batches hold pairs of similar length (sorted within shuffled windows), so little compute is
spent on padding. The learning-rate schedule (linear warm-up, linear decay) has to end when
the budget does: after a few measured steps the planned step count is cut to what fits,
and that count is saved with the checkpoint so a resumed run follows the same schedule.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from tokenizers import Encoding, Tokenizer

from crag_edge.models.onnx_session import pad_batch
from crag_edge.training import TrainingInputError
from crag_edge.training.data import TrainPair
from crag_edge.training.model import Evaluator

STATE_FILE = "train_state.pt"
PROBE_STEPS = 3  # steps timed (after the first) before the schedule is fitted to the budget
WINDOW_BATCHES = 50  # length-sorting window, in batches
SAFETY = 0.95  # share of the remaining budget the fitted schedule plans to use


@dataclass(frozen=True)
class TrainConfig:
    batch_size: int = 16
    learning_rate: float = 6e-5
    weight_decay: float = 0.01
    warmup_share: float = 0.1
    epochs: float = 2.0
    max_length: int = 256
    checkpoint_every_s: float = 60.0
    seed: int = 13


@dataclass
class TrainReport:
    steps_done: int
    total_steps: int
    planned_steps: int
    seconds: float
    resumed_from: int
    complete: bool
    final_loss: float | None
    losses: list[float] = field(default_factory=list)


def encode(tokenizer: Tokenizer, pairs: Sequence[TrainPair]) -> list[Encoding]:
    """Pairs exactly as `OnnxCrossEncoder` encodes them (the tokenizer must be configured)."""
    return tokenizer.encode_batch([(p.query, p.passage) for p in pairs])


def plan_batches(lengths: Sequence[int], batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """One epoch's batches: shuffled, length-sorted within windows, batch order shuffled."""
    rng = random.Random(f"{seed}:{epoch}")
    order = list(range(len(lengths)))
    rng.shuffle(order)
    batches: list[list[int]] = []
    window = batch_size * WINDOW_BATCHES
    for start in range(0, len(order), window):
        chunk = sorted(order[start : start + window], key=lambda i: lengths[i])
        batches.extend(chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size))
    rng.shuffle(batches)
    return batches


def fingerprint(config: TrainConfig, model: Evaluator, pairs: Sequence[TrainPair]) -> str:
    """Identity of a training run: a checkpoint is resumed only by the same run."""
    digest = hashlib.sha256()
    digest.update(json.dumps(asdict(config), sort_keys=True).encode())
    digest.update(json.dumps(model.config, sort_keys=True).encode())
    for p in pairs:
        digest.update(f"{p.query}\x1f{p.passage}\x1f{p.label}\x1e".encode())
    return digest.hexdigest()


def _feeds(encodings: Sequence[Encoding]) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(v) for k, v in pad_batch(list(encodings)).items()}


def predict_logits(
    model: Evaluator, encodings: Sequence[Encoding], batch_size: int = 32
) -> npt.NDArray[np.float32]:
    """Logits in input order, dropout off."""
    model.eval()
    out = np.empty(len(encodings), dtype=np.float32)
    order = np.argsort([len(e.ids) for e in encodings], kind="stable")
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            out[rows] = model(**_feeds([encodings[i] for i in rows])).numpy()
    return out


class Trainer:
    """Trains `model` on `pairs`; `state_dir` holds the resumable checkpoint."""

    def __init__(
        self,
        model: Evaluator,
        encodings: Sequence[Encoding],
        labels: Sequence[float],
        config: TrainConfig,
        state_dir: Path,
        run_id: str,
    ) -> None:
        if not encodings:
            raise TrainingInputError("no training pairs")
        self.model = model
        self.encodings = encodings
        self.labels = torch.tensor(labels, dtype=torch.float32)
        self.config = config
        self.state_path = state_dir / STATE_FILE
        self.run_id = run_id
        self.lengths = [len(e.ids) for e in encodings]
        self.batches_per_epoch = math.ceil(len(encodings) / config.batch_size)
        self.planned_steps = max(1, round(config.epochs * self.batches_per_epoch))
        decay = [p for n, p in model.named_parameters() if "LayerNorm" not in n and "bias" not in n]
        rest = [p for n, p in model.named_parameters() if "LayerNorm" in n or "bias" in n]
        self.optimizer = torch.optim.AdamW(
            [
                {"params": decay, "weight_decay": config.weight_decay},
                {"params": rest, "weight_decay": 0.0},
            ],
            lr=config.learning_rate,
        )
        self._epoch_cache: tuple[int, list[list[int]]] | None = None

    def _batch(self, step: int) -> list[int]:
        epoch, index = divmod(step, self.batches_per_epoch)
        if self._epoch_cache is None or self._epoch_cache[0] != epoch:
            batches = plan_batches(self.lengths, self.config.batch_size, self.config.seed, epoch)
            self._epoch_cache = (epoch, batches)
        return self._epoch_cache[1][index]

    def _lr(self, step: int, total: int) -> float:
        warmup = max(1, round(self.config.warmup_share * total))
        if step < warmup:
            return self.config.learning_rate * (step + 1) / warmup
        return self.config.learning_rate * max(0.0, (total - step) / max(1, total - warmup))

    def _save(self, step: int, total: int, seconds: float, losses: list[float]) -> None:
        state = {
            "run_id": self.run_id,
            "step": step,
            "total_steps": total,
            "seconds": seconds,
            "losses": losses,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "rng": torch.get_rng_state(),
        }
        tmp = self.state_path.with_name(f".{self.state_path.name}.{os.getpid()}.tmp")
        torch.save(state, tmp)
        os.replace(tmp, self.state_path)

    def _load(self) -> dict[str, Any] | None:
        if not self.state_path.is_file():
            return None
        state: dict[str, Any] = torch.load(self.state_path, weights_only=True)
        if state.get("run_id") != self.run_id:
            return None  # another run's checkpoint (other data or settings): start afresh
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        return state

    def train(
        self, deadline: float, on_step: Callable[[int, int, float], None] | None = None
    ) -> TrainReport:
        """Train until the schedule ends or the monotonic `deadline` passes; the state is
        saved periodically, at the end, and when interrupted (Ctrl-C), then resumed here."""
        state = self._load()
        step = state["step"] if state else 0
        total: int = state["total_steps"] if state else self.planned_steps
        fitted = state is not None
        seconds = float(state["seconds"]) if state else 0.0
        losses: list[float] = list(state["losses"]) if state else []
        resumed_from = step
        started = time.monotonic()
        probe_from = started
        last_save = started
        loss_fn = torch.nn.BCEWithLogitsLoss()
        self.model.train()
        try:
            while step < total and time.monotonic() < deadline:
                rows = self._batch(step)
                for group in self.optimizer.param_groups:
                    group["lr"] = self._lr(step, total)
                logits = self.model(**_feeds([self.encodings[i] for i in rows]))
                loss = loss_fn(logits, self.labels[rows])
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.optimizer.step()
                step += 1
                losses.append(round(loss.item(), 5))
                if step - resumed_from == 1:
                    probe_from = time.monotonic()  # the first step also warms up: not timed
                if not fitted and step - resumed_from == PROBE_STEPS + 1:
                    per_step = (time.monotonic() - probe_from) / PROBE_STEPS
                    affordable = int(SAFETY * (deadline - time.monotonic()) / per_step)
                    total = max(step, min(self.planned_steps, step + affordable))
                    fitted = True
                if on_step:
                    on_step(step, total, losses[-1])
                if time.monotonic() - last_save >= self.config.checkpoint_every_s:
                    self._save(step, total, seconds + time.monotonic() - started, losses)
                    last_save = time.monotonic()
        finally:  # also on KeyboardInterrupt: the next run resumes from here
            seconds += time.monotonic() - started
            self._save(step, total, seconds, losses)
        tail = losses[-50:]
        return TrainReport(
            steps_done=step,
            total_steps=total,
            planned_steps=self.planned_steps,
            seconds=round(seconds, 1),
            resumed_from=resumed_from,
            complete=step >= total,
            final_loss=round(sum(tail) / len(tail), 4) if tail else None,
            losses=losses,
        )
