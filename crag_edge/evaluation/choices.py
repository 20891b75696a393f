"""Comma-separated choices of an evaluation command (`--systems`, `--scorers`)."""

from __future__ import annotations

from collections.abc import Sequence


def parse_choices(text: str, allowed: Sequence[str]) -> list[str]:
    """`a, b,a` as `["a", "b"]` (any subset of `allowed`, in the order given, once each);
    an unknown name or an empty list is refused."""
    chosen = list(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    unknown = [s for s in chosen if s not in allowed]
    if unknown or not chosen:
        raise ValueError(f"takes names from {','.join(allowed)}; got {text!r}")
    return chosen
