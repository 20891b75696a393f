"""Snapshots of the KV cache after a prompt's fixed part (its system prompt), restored when a
later prompt starts with that part but the cache holds another prompt.

llama.cpp keeps one sequence per context: consecutive prompts reuse their common prefix
(`LlamaRuntime._eval_prompt`), but a judge or rewrite call between two answers replaces the
answer's system prompt in the cache, so each answer would evaluate it again before its first
word. The sequence's state after that prefix (`llama_state_seq_get_data`: the KV cells of
those tokens) is copied back instead, far faster than evaluating them.

A one-shot process (`crag-edge ask`) would still evaluate every system prompt once, so its
first word would come later than a served answer's (measured in docs/measurements.md, "First
word and end-to-end answer time"). Snapshots of system prompts
are therefore also kept on disk (`StateFiles`), keyed by the model file, the llama.cpp build,
the context size and the prompt's tokens, with a checksum, so a later process copies them
back too. Only system prompts are written: a prefix holding earlier turns holds a user's
conversation, which stays in memory.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llama_cpp import Llama

# Distinct fixed prefixes kept: the answer's, the judge's, the rewrite's, the follow-up's.
CAPACITY = 4
_SEQUENCE = 0  # llama-cpp-python's Llama evaluates everything in sequence 0
# Snapshot files kept per folder, the newest: a changed prompt or model leaves old ones behind.
FILES_KEPT = 16
_DIGEST = hashlib.sha256().digest_size


class StateFiles:
    """System-prompt snapshots on disk, one file per prefix. Every failure to read or write
    one (a read-only or full disk, a damaged file) only means that prefix is evaluated again.
    """

    def __init__(self, folder: Path, identity: str, keep: int = FILES_KEPT) -> None:
        self._folder = folder
        self._identity = identity
        self._keep = keep

    @classmethod
    def for_model(cls, folder: Path, model_file: Path, build: str, n_ctx: int) -> StateFiles:
        """Snapshots valid only for this model file (name, size, modification time), this
        llama.cpp build and this context size: any change starts afresh."""
        stat = model_file.stat()
        identity = f"{build}|{model_file.name}|{stat.st_size}|{stat.st_mtime_ns}|{n_ctx}"
        return cls(folder, identity)

    def read(self, prefix: Sequence[int]) -> bytes | None:
        """The snapshot of `prefix`, or None when there is none or it fails its checksum."""
        try:
            stored = self._path(prefix).read_bytes()
        except OSError:
            return None
        digest, data = stored[:_DIGEST], stored[_DIGEST:]
        return data if data and hashlib.sha256(data).digest() == digest else None

    def write(self, prefix: Sequence[int], data: bytes) -> None:
        """Store the snapshot of `prefix` (atomically: a reader never sees half a file)."""
        path = self._path(prefix)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        try:
            self._folder.mkdir(parents=True, exist_ok=True)
            partial.write_bytes(hashlib.sha256(data).digest() + data)
            os.replace(partial, path)
            self._prune()
        except OSError:
            partial.unlink(missing_ok=True)

    def discard(self, prefix: Sequence[int]) -> None:
        """Forget a snapshot llama.cpp refused."""
        self._path(prefix).unlink(missing_ok=True)

    def _path(self, prefix: Sequence[int]) -> Path:
        key = f"{self._identity}|{','.join(map(str, prefix))}".encode()
        return self._folder / f"{hashlib.sha256(key).hexdigest()[:32]}.kv"

    def _prune(self) -> None:
        files = sorted(self._folder.glob("*.kv"), key=lambda f: f.stat().st_mtime, reverse=True)
        for stale in files[self._keep :]:
            stale.unlink(missing_ok=True)


@dataclass(frozen=True)
class CacheSnapshot:
    """The tokens a cache held and its KV state after them (`PrefixStates.snapshot`)."""

    tokens: tuple[int, ...]
    state: Any


class PrefixStates:
    """A few prompt prefixes and the KV state after each, least recently used dropped first.
    Callers hold the runtime's lock: the states are the context's."""

    def __init__(
        self, llama_cpp: Any, llm: Llama, capacity: int = CAPACITY, files: StateFiles | None = None
    ) -> None:
        self._lib = llama_cpp
        self._llm = llm
        self._capacity = capacity
        self._files = files
        self._states: OrderedDict[tuple[int, ...], Any] = OrderedDict()

    def __contains__(self, prefix: Sequence[int]) -> bool:
        return tuple(prefix) in self._states

    def longest_in(self, prompt: Sequence[int]) -> int:
        """Length of the longest stored prefix `prompt` starts with and goes beyond; 0: none."""
        best = 0
        for prefix in self._states:
            n = len(prefix)
            if best < n < len(prompt) and tuple(prompt[:n]) == prefix:
                best = n
        return best

    def load(self, prefix: Sequence[int]) -> None:
        """Bring the snapshot of `prefix` from disk, if one is there and none is in memory."""
        key = tuple(prefix)
        if key in self._states or self._files is None:
            return
        data = self._files.read(key)
        if data is not None:
            self._remember(key, (ctypes.c_uint8 * len(data)).from_buffer_copy(data))

    def save(self, prefix: Sequence[int], *, persist: bool = False) -> None:
        """Remember the cache's state, which must hold exactly `prefix`; with `persist`, on
        disk too."""
        buffer = self._copy()
        if buffer is None:
            return  # llama.cpp could not copy it: the prefix is evaluated again next time
        self._remember(tuple(prefix), buffer)
        if persist and self._files is not None:
            self._files.write(prefix, bytes(buffer))

    def snapshot(self) -> CacheSnapshot | None:
        """The cache as it is, whatever it holds: its tokens and its state (None if llama.cpp
        could not copy it). Kept by the caller, not here: it is put back once (`put_back`)."""
        buffer = self._copy()
        if buffer is None:
            return None
        held = self._llm.input_ids[: self._llm.n_tokens]
        return CacheSnapshot(tuple(int(t) for t in held), buffer)

    def put_back(self, snapshot: CacheSnapshot) -> None:
        """Bring the cache back to `snapshot`; empty it if llama.cpp refused (it is then
        evaluated again from the start, never trusted half restored)."""
        buffer = snapshot.state
        if self._lib.llama_state_seq_set_data(self._llm.ctx, buffer, len(buffer), _SEQUENCE) == 0:
            self._llm.reset()
            return
        n = len(snapshot.tokens)
        self._llm.input_ids[:n] = snapshot.tokens
        self._llm.n_tokens = n

    def _copy(self) -> Any:
        ctx = self._llm.ctx
        size = self._lib.llama_state_seq_get_size(ctx, _SEQUENCE)
        buffer = (ctypes.c_uint8 * size)()
        if self._lib.llama_state_seq_get_data(ctx, buffer, size, _SEQUENCE) != size:
            return None
        return buffer

    def _remember(self, key: tuple[int, ...], buffer: Any) -> None:
        self._states[key] = buffer
        if len(self._states) > self._capacity:
            self._states.popitem(last=False)

    def restore(self, prompt: Sequence[int], n: int) -> bool:
        """Bring the cache to the stored prefix `prompt[:n]`; False if llama.cpp refused (the
        cache must then be rebuilt from scratch)."""
        key = tuple(prompt[:n])
        buffer = self._states[key]
        if self._lib.llama_state_seq_set_data(self._llm.ctx, buffer, len(buffer), _SEQUENCE) == 0:
            del self._states[key]
            if self._files is not None:
                self._files.discard(key)
            return False
        self._states.move_to_end(key)
        self._llm.input_ids[:n] = key
        self._llm.n_tokens = n
        return True
