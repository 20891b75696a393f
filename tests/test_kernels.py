"""Numba kernels against their pure-Python references, plus hand-computed examples."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crag_edge import kernels
from crag_edge.kernels import Aggregation, reference

NAN = math.nan
ATOL = 1e-9
# The first call of each kernel loads (or compiles) its machine code: no per-example deadline.
THOROUGH = settings(max_examples=300, deadline=None)
QUICK = settings(deadline=None)

similarity = st.one_of(st.floats(-1.0, 1.0), st.just(NAN))
score = st.one_of(st.floats(0.0, 1.0), st.just(NAN))
strategy_code = st.sampled_from([int(a) for a in Aggregation])


def float_lists(element: st.SearchStrategy[float]) -> st.SearchStrategy[list[float]]:
    """Random lists, including empty ones and lists of one repeated value."""
    return st.one_of(
        st.lists(element, max_size=40),
        st.builds(lambda x, n: [x] * n, element, st.integers(0, 40)),
    )


def close(actual: object, expected: object) -> None:
    np.testing.assert_allclose(
        np.asarray(actual, dtype=np.float64),
        np.asarray(expected, dtype=np.float64),
        rtol=0,
        atol=ATOL,
        equal_nan=True,
    )


def f64(values: list[float]) -> np.ndarray:
    return np.array(values, dtype=np.float64)


def i64(values: list[int]) -> np.ndarray:
    return np.array(values, dtype=np.int64)


# Term ids from a small range so that items and queries overlap, plus extreme int64 values.
term = st.one_of(st.integers(0, 30), st.integers(-(2**63), 2**63 - 1))


@st.composite
def csr_items(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    items = draw(st.lists(st.lists(term, max_size=25), max_size=15))
    offsets, ids = [0], []
    for item in items:
        ids.extend(sorted(set(item)))
        offsets.append(len(ids))
    return offsets, ids


@THOROUGH
@given(st.lists(term, max_size=10), csr_items())
def test_keyword_coverage_matches_reference(
    query: list[int], csr: tuple[list[int], list[int]]
) -> None:
    offsets, ids = csr
    got = kernels.keyword_coverage(i64(query), i64(offsets), i64(ids))
    close(got, reference.keyword_coverage(query, offsets, ids))
    assert got.shape == (len(offsets) - 1,)


@THOROUGH
@given(float_lists(similarity), st.floats(0.0, 1.0))
def test_coherence_matches_reference(sims: list[float], cap: float) -> None:
    close(kernels.coherence(f64(sims), cap), reference.coherence(sims, cap))
    close(kernels.coherence_per_item(f64(sims), cap), reference.coherence_per_item(sims, cap))


@QUICK
@given(float_lists(st.floats(0.0, 1.0)))
def test_per_item_coherence_averages_to_list_coherence(sims: list[float]) -> None:
    if sims:
        close(np.mean(kernels.coherence_per_item(f64(sims))), kernels.coherence(f64(sims)))


@QUICK
@given(st.lists(st.integers(-5, 500), max_size=40), st.integers(-2, 300))
def test_length_adequacy_matches_reference(counts: list[int], min_tokens: int) -> None:
    close(
        kernels.length_adequacy(i64(counts), min_tokens),
        reference.length_adequacy(counts, min_tokens),
    )


@THOROUGH
@given(st.one_of(st.lists(st.integers(0, 5), max_size=40), st.lists(term, max_size=40)))
def test_source_signals_match_reference(sources: list[int]) -> None:
    diversity = kernels.source_diversity(i64(sources))
    uniqueness = kernels.source_uniqueness(i64(sources))
    close(diversity, reference.source_diversity(sources))
    close(uniqueness, reference.source_uniqueness(sources))
    if sources:
        close(np.mean(uniqueness), diversity)


@st.composite
def signal_matrix(draw: st.DrawFn) -> tuple[list[list[float]], list[float]]:
    m = draw(st.integers(1, 6))
    rows = draw(st.lists(st.lists(score, min_size=m, max_size=m), max_size=30))
    weights = draw(
        st.lists(
            st.one_of(st.floats(0.0, 1.0), st.just(0.0), st.floats(-1.0, 0.0), st.just(NAN)),
            min_size=m,
            max_size=m,
        )
    )
    return rows, weights


@THOROUGH
@given(signal_matrix())
def test_weighted_sum_matches_reference(case: tuple[list[list[float]], list[float]]) -> None:
    rows, weights = case
    matrix = np.array(rows, dtype=np.float64).reshape(len(rows), len(weights))
    close(kernels.weighted_sum(matrix, f64(weights)), reference.weighted_sum(rows, weights))


@THOROUGH
@given(float_lists(score), strategy_code)
def test_aggregate_matches_reference(scores: list[float], strategy: int) -> None:
    close(kernels.aggregate(f64(scores), strategy), reference.aggregate(scores, strategy))
    close(kernels.score_variance(f64(scores)), reference.score_variance(scores))


# Hand-computed examples.


def test_keyword_coverage_example() -> None:
    offsets = i64([0, 3, 3, 5])
    ids = i64([1, 2, 9, 2, 7])
    got = kernels.keyword_coverage(i64([2, 1, 2, 5]), offsets, ids)  # unique query {1, 2, 5}
    close(got, [2 / 3, 0.0, 1 / 3])
    close(kernels.keyword_coverage(i64([]), offsets, ids), [0.0, 0.0, 0.0])


def test_coherence_example() -> None:
    # mean 0.6, population variance 0.04 → 0.6 * 0.96
    close(kernels.coherence(f64([0.4, 0.8, NAN])), 0.576)
    close(kernels.coherence_per_item(f64([0.4, 0.8, NAN])), [0.384, 0.768, NAN])
    # variance 0.569 is capped at 0.3
    close(kernels.coherence(f64([1.0, 1.0, -0.6])), 1.4 / 3 * 0.7)
    assert kernels.coherence(f64([-0.5, -0.2])) == 0.0
    assert kernels.coherence(f64([])) == 0.0
    assert kernels.coherence(f64([NAN, NAN])) == 0.0
    assert kernels.coherence(f64([0.7] * 5)) == pytest.approx(0.7)


def test_length_and_source_examples() -> None:
    close(kernels.length_adequacy(i64([0, 50, 100, 250, -3]), 100), [0.0, 0.5, 1.0, 1.0, 0.0])
    close(kernels.length_adequacy(i64([0, 7]), 0), [1.0, 1.0])
    assert kernels.source_diversity(i64([4, 4, 9, 1])) == 0.75
    assert kernels.source_diversity(i64([])) == 0.0
    close(kernels.source_uniqueness(i64([4, 4, 9, 4])), [1 / 3, 1 / 3, 1.0, 1 / 3])
    assert kernels.source_uniqueness(i64([])).shape == (0,)


def test_weighted_sum_example() -> None:
    signals = np.array([[1.0, 0.0, 0.5], [NAN, 1.0, 0.0], [NAN, NAN, NAN]])
    got = kernels.weighted_sum(signals, f64([0.5, 0.3, 0.2]))
    close(got, [0.6, 0.6, NAN])  # second row: (0.3 * 1) / (0.3 + 0.2)
    # Unnormalised weights give the same result; a zero weight switches a signal off.
    close(kernels.weighted_sum(signals, f64([5.0, 3.0, 2.0])), got)
    close(kernels.weighted_sum(signals, f64([1.0, 0.0, 0.0])), [1.0, NAN, NAN])
    assert kernels.weighted_sum(np.empty((0, 3)), f64([0.5, 0.3, 0.2])).shape == (0,)


def test_aggregate_examples() -> None:
    scores = f64([0.9, 0.5, NAN, 0.2])
    assert kernels.aggregate(scores, Aggregation.MEAN) == pytest.approx(1.6 / 3)
    assert kernels.aggregate(scores, Aggregation.MAX) == 0.9
    assert kernels.aggregate(scores, Aggregation.MIN) == 0.2
    # weights 1, 1/2, (skipped), 1/4
    expected = (0.9 + 0.5 / 2 + 0.2 / 4) / (1 + 1 / 2 + 1 / 4)
    assert kernels.aggregate(scores, Aggregation.RANK_WEIGHTED) == pytest.approx(expected)
    assert kernels.score_variance(f64([0.0, 1.0, NAN])) == 0.25
    for strategy in Aggregation:
        assert kernels.aggregate(f64([]), strategy) == 0.0
        assert kernels.aggregate(f64([NAN]), strategy) == 0.0
        assert kernels.aggregate(f64([0.4] * 7), strategy) == pytest.approx(0.4)
    with pytest.raises(ValueError):
        kernels.aggregate(scores, 99)


def test_aggregation_parse() -> None:
    assert Aggregation.parse("rank-weighted") is Aggregation.RANK_WEIGHTED
    assert Aggregation.parse(" Max ") is Aggregation.MAX
    assert Aggregation.MIN == kernels.AGG_MIN
    with pytest.raises(ValueError, match="rank_weighted"):
        Aggregation.parse("median")


@st.composite
def bit_columns(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(words, chunks) bit columns with few distinct values (so distances tie), a query, a
    mask (empty: all allowed) and a count that may exceed what the mask allows."""
    words, chunks = draw(st.integers(1, 6)), draw(st.integers(0, 60))
    palette = draw(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=4))
    values = draw(
        st.lists(st.sampled_from(palette), min_size=words * chunks, max_size=words * chunks)
    )
    columns = np.array(values, dtype=np.uint64).reshape(words, chunks)
    query = np.array(
        draw(st.lists(st.sampled_from(palette), min_size=words, max_size=words)), dtype=np.uint64
    )
    masked = draw(st.booleans())
    mask = np.array(
        draw(st.lists(st.booleans(), min_size=chunks, max_size=chunks)) if masked else [],
        dtype=np.bool_,
    )
    return columns, query, mask, draw(st.integers(0, 70))


@THOROUGH
@given(bit_columns())
def test_hamming_nearest_takes_the_nearest_allowed_chunks_ties_in_order(
    case: tuple[np.ndarray, np.ndarray, np.ndarray, int],
) -> None:
    columns, query, mask, count = case
    distances = np.bitwise_count(columns ^ query[:, None]).sum(axis=0).astype(np.int64)
    allowed = np.flatnonzero(mask) if mask.size else np.arange(columns.shape[1])
    expected = allowed[np.argsort(distances[allowed], kind="stable")][:count]
    found = kernels.hamming_nearest(columns, query, mask, count)
    assert sorted(found.tolist()) == sorted(expected.tolist())
