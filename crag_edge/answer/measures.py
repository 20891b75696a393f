"""The kind of quantity a question asks for (a price, a length, a weight) and the kinds a
sentence states, read from the units written beside its numbers.

A number is not an answer to every "how much": asked what a slipway haul-out costs, a small
model read the harbour's service table and answered "8 metres", the row's default length,
and the passage states it. A sentence whose every quantity is of another kind (metres for a
price, litres for a depth) states no answer of the kind asked. A bare number, or one whose
unit is not known here, is left to the other rules: only a unit that names another kind
tells that it answers something else.

"How long" is the exception: it asks for a time or a length, and a number with no unit does
not say one. Asked how long git gc keeps unreachable objects, a small model
took gc.auto's "The default value is 6700" for the answer ("… the number of loose objects that
git gc keeps before pruning them is 6700"); every right answer to such a question in the
question sets' runs names its unit ("2 weeks", "90 days", "two hours", "12 meters").
"""

from __future__ import annotations

import re

from crag_edge.answer.support import NUMBER_WORDS


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Units as written beside a number, lower-cased, by the kind of quantity they measure.
UNITS: dict[str, frozenset[str]] = {
    "money": _words(
        "€ $ £ ¥ eur usd gbp chf sek nok dkk euro euros dollar dollars cent cents pence"
    ),
    "length": _words(
        "mm cm m km ft yd metre metres meter meters millimetre millimetres millimeter "
        "millimeters centimetre centimetres centimeter centimeters kilometre kilometres "
        "kilometer kilometers inch inches foot feet yard yards mile miles"
    ),
    "mass": _words(
        "mg g kg lb lbs oz gram grams kilogram kilograms tonne tonnes ton tons ounce ounces"
    ),
    "volume": _words(
        "ml l litre litres liter liters millilitre millilitres milliliter milliliters gallon "
        "gallons"
    ),
    "time": _words(
        "ns us µs ms s sec secs h hr hrs min mins nanosecond nanoseconds microsecond "
        "microseconds millisecond milliseconds second seconds minute minutes hour hours day "
        "days week weeks month months year years decade decades century centuries"
    ),
}
# What a question asking for a kind of quantity says.
ASKS: dict[str, re.Pattern[str]] = {
    "money": re.compile(r"\b(?:cost|costs|price|prices|priced|fee|fees)\b", re.I),
    "length": re.compile(
        r"\bhow (?:deep|wide|tall|far)\b|\b(?:length|depth|width|height|distance)\b", re.I
    ),
    "mass": re.compile(r"\bhow heavy\b|\bweigh(?:s|t)?\b", re.I),
}
# A question asking for a time or a length, which a bare number does not say.
ASKS_DURATION = re.compile(r"\bhow long\b", re.I)
# A quantity: a currency sign before a number, or a word right after it ("8 metres", "5kg",
# "two hours").
_SIGN_BEFORE = re.compile(r"([€$£¥])\s?\d")
_UNIT_AFTER = re.compile(
    rf"(?:\d(?:[.,]\d+)*|\b(?:{'|'.join(sorted(NUMBER_WORDS))}))[\s-]?([^\W\d_]+)", re.I
)


def kind_asked(question: str) -> str | None:
    """The one kind of quantity the question asks for; None when it asks for none or for
    more than one ("what does the rope cost by weight")."""
    kinds = [kind for kind, pattern in ASKS.items() if pattern.search(question)]
    return kinds[0] if len(kinds) == 1 else None


def kinds_stated(sentence: str) -> set[str]:
    """The kinds of the quantities the sentence writes with a known unit."""
    units = {m.group(1) for m in _SIGN_BEFORE.finditer(sentence)}
    units |= {m.group(1).lower() for m in _UNIT_AFTER.finditer(sentence)}
    return {kind for kind, known in UNITS.items() if units & known}


def unmeasured(question: str, sentence: str) -> bool:
    """Whether the question asks how long and the sentence writes no time or length (a
    number with its unit). ("How old" is left alone: "She is 45." answers it.)"""
    return ASKS_DURATION.search(question) is not None and not (
        kinds_stated(sentence) & {"time", "length"}
    )


def of_another_kind(question: str, sentence: str) -> bool:
    """Whether the question asks for one kind of quantity and every quantity the sentence
    writes with a known unit is of other kinds (none of the kind asked)."""
    wanted = kind_asked(question)
    stated = kinds_stated(sentence)
    return wanted is not None and bool(stated) and wanted not in stated
