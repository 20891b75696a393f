"""The binary pre-filter's scan: hamming distances to every chunk's sign bits, nearest first.

One pass computes each chunk's distance (a bit count that LLVM turns into `popcnt`) and a
histogram of the distances, which can only be 0 to 64 * words; the cut-off distance is read
from the histogram and a second pass collects the chunks under it. No sort and no temporary
array per word: at a million chunks this is a few milliseconds where numpy's xor, bit count
and `argpartition` took about 25 (docs/measurements.md, "A million chunks").
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit

Words = npt.NDArray[np.uint64]  # (words, chunks): word w of every chunk's bits; (words,)
Mask = npt.NDArray[np.bool_]
Indices = npt.NDArray[np.int64]

_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)


@njit(cache=True)
def _bit_count(x: np.uint64) -> np.uint64:
    x = x - ((x >> np.uint64(1)) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return (x * _H01) >> np.uint64(56)


@njit(cache=True)
def hamming_nearest(columns: Words, query: Words, allowed: Mask, count: int) -> Indices:
    """Positions of the `count` chunks nearest to `query` (one word per row of `columns`) by
    hamming distance, among those `allowed` marks (an empty mask allows all); ties are taken
    in position order. Fewer when fewer are allowed. Unordered."""
    words, chunks = columns.shape
    use_mask = allowed.size > 0
    distances = np.empty(chunks, dtype=np.int32)
    histogram = np.zeros(64 * words + 2, dtype=np.int64)
    for i in range(chunks):
        if use_mask and not allowed[i]:
            distances[i] = -1
            continue
        distance = np.uint64(0)
        for w in range(words):
            distance += _bit_count(columns[w, i] ^ query[w])
        distances[i] = np.int32(distance)
        histogram[distances[i]] += 1
    cutoff, below = 0, 0
    while cutoff < histogram.size - 1 and below + histogram[cutoff] < count:
        below += histogram[cutoff]
        cutoff += 1
    ties = count - below
    found = np.empty(min(count, chunks), dtype=np.int64)
    taken = 0
    for i in range(chunks):
        d = distances[i]
        if d < 0 or d > cutoff:
            continue
        if d == cutoff:
            if ties <= 0:
                continue
            ties -= 1
        found[taken] = i
        taken += 1
    return found[:taken]
