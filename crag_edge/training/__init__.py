"""Training the retrieval evaluator (the cascade's cross-encoder tier) on the user's machine.

Only this package imports torch, and only while training: inference loads the exported
ONNX graph with onnxruntime. Without torch, training fails with the command that installs it.
"""

from __future__ import annotations

import importlib.util

TRAIN_HINT = "pip install 'crag-edge[train]'"


class TorchMissingError(RuntimeError):
    """Training needs PyTorch, which is an optional extra."""


class TrainingInputError(ValueError):
    """The training options or data cannot make a model (a layer count the base model lacks,
    no pairs to learn from); the message names the option or the data."""


def require_torch() -> None:
    """Fail before any slow work when torch is missing, saying how to install it."""
    if importlib.util.find_spec("torch") is None:
        raise TorchMissingError(
            f"training the evaluator needs PyTorch (CPU build): run `{TRAIN_HINT}` "
            "(inference never needs it)"
        )
