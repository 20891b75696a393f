"""Snapshots of the KV cache after a prompt's fixed part (its system prompt), restored when a
later prompt starts with that part but the cache holds another prompt.

llama.cpp keeps one sequence per context: consecutive prompts reuse their common prefix
(`LlamaRuntime._eval_prompt`), but a judge or rewrite call between two answers replaces the
answer's system prompt in the cache, so each answer would evaluate it again (~90 tokens, about
a second on two cores with Qwen2.5-1.5B). The sequence's state after that prefix
(`llama_state_seq_get_data`: the KV cells of those tokens, ~28 kB per token for
Qwen2.5-1.5B) is copied back in milliseconds instead.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llama_cpp import Llama

# Distinct fixed prefixes kept: the answer's, the judge's, the rewrite's, the follow-up's.
CAPACITY = 4
_SEQUENCE = 0  # llama-cpp-python's Llama evaluates everything in sequence 0


class PrefixStates:
    """A few prompt prefixes and the KV state after each, least recently used dropped first.
    Callers hold the runtime's lock: the states are the context's."""

    def __init__(self, llama_cpp: Any, llm: Llama, capacity: int = CAPACITY) -> None:
        self._lib = llama_cpp
        self._llm = llm
        self._capacity = capacity
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

    def save(self, prefix: Sequence[int]) -> None:
        """Remember the cache's state, which must hold exactly `prefix`."""
        ctx = self._llm.ctx
        size = self._lib.llama_state_seq_get_size(ctx, _SEQUENCE)
        buffer = (ctypes.c_uint8 * size)()
        if self._lib.llama_state_seq_get_data(ctx, buffer, size, _SEQUENCE) != size:
            return  # llama.cpp could not copy it: the prefix is evaluated again next time
        self._states[tuple(prefix)] = buffer
        if len(self._states) > self._capacity:
            self._states.popitem(last=False)

    def restore(self, prompt: Sequence[int], n: int) -> bool:
        """Bring the cache to the stored prefix `prompt[:n]`; False if llama.cpp refused (the
        cache must then be rebuilt from scratch)."""
        key = tuple(prompt[:n])
        buffer = self._states[key]
        if self._lib.llama_state_seq_set_data(self._llm.ctx, buffer, len(buffer), _SEQUENCE) == 0:
            del self._states[key]
            return False
        self._states.move_to_end(key)
        self._llm.input_ids[:n] = key
        self._llm.n_tokens = n
        return True
