"""A spreadsheet number as its cell's number format shows it (`0.0%`, `[$$-409]#,##0.00`,
`hh:mm`), so a row reads `Discount: 12.5%; Total: $1,234.50`, not `0.125` and `1234.5`.

Dates read in ISO form (`2026-03-01`) whatever the format's order of day and month, which a
reader of another locale would misread; times as `14:30` (`14:30:05` when the format shows
seconds). Numbers keep the format's decimals, thousands separators, percent sign and
currency symbol. A format this does not render (General, text, fractions, scientific
notation, elapsed time) gives None, and the cell reads as its plain value.
"""

from __future__ import annotations

import datetime
import functools
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

# Excel's built-in formats a file names by number only (ECMA-376 18.8.30), non-General ones.
BUILTIN = {
    1: "0", 2: "0.00", 3: "#,##0", 4: "#,##0.00", 9: "0%", 10: "0.00%",
    14: "mm-dd-yy", 15: "d-mmm-yy", 16: "d-mmm", 17: "mmm-yy", 18: "h:mm AM/PM",
    19: "h:mm:ss AM/PM", 20: "h:mm", 21: "h:mm:ss", 22: "m/d/yy h:mm",
    45: "mm:ss", 46: "[h]:mm:ss", 47: "mmss.0",
}  # fmt: skip
_EPOCH = datetime.datetime(1899, 12, 30)
_LAST_DAY = 2958466  # 9999-12-31
# The pieces of one section of a format code: quoted text, a currency tag (`[$€-407]`), any
# other bracket (a colour, a condition), an escaped character, spacing (`_)`) and fill
# (`*-`) characters, then any other single character.
_TOKEN = re.compile(r'"([^"]*)"|\[\$([^\]-]*)[^\]]*\]|\[[^\]]*\]|\\(.)|[_*].|(.)', re.DOTALL)
_PLACEHOLDERS = frozenset("0#?.,")
# Elapsed time (`[h]:mm`): hours past a day, which a time of day cannot show.
_ELAPSED = re.compile(r"\[(?:h+|m+|s+)\]", re.IGNORECASE)


@dataclass(frozen=True)
class _Format:
    """What a format code shows: a date or time (`letters`: its pattern, lower case), or a
    number with `decimals` places, thousands separated or not, between literal texts."""

    letters: str = ""
    prefix: str = ""
    suffix: str = ""
    decimals: int = 0
    grouping: str = ""  # "," or ""
    percent: bool = False


def shown(value: float, code: str) -> str | None:
    """`value` as the format `code` shows it; None when the code is not one rendered here."""
    form = _compiled(code)
    if form is None:
        return None
    if form.letters:
        return _moment(value, form.letters)
    return _number(value * 100 if form.percent else value, form)


@functools.lru_cache(maxsize=256)  # a sheet has a few formats, used by every row
def _compiled(code: str) -> _Format | None:
    """The first section of `code` (the one for positive numbers, whose sign is written
    before it for negative ones) read once; None for a code not rendered here."""
    section = code.split(";", 1)[0]
    if _ELAPSED.search(section):
        return None
    before: list[str] = []
    after: list[str] = []
    pattern: list[str] = []
    for match in _TOKEN.finditer(section):
        quoted, currency, escaped, char = match.groups()
        literal = quoted if quoted is not None else currency if currency is not None else escaped
        if char is not None and (char in _PLACEHOLDERS or char.isalpha()):
            pattern.append(char)
        elif char is not None or literal:
            (after if pattern else before).append(literal or char or "")
    letters = "".join(pattern).lower()
    if any(letter in letters for letter in "dmyhs"):
        return _Format(letters=letters)
    if not any(c in "0#?" for c in letters) or "e" in letters or "/" in section:
        return None  # no number shown, scientific notation, a fraction
    integer, _, fraction = letters.partition(".")
    prefix, suffix = "".join(before), "".join(after)
    return _Format(
        prefix=prefix,
        suffix=suffix,
        decimals=sum(1 for c in fraction if c in "0#?"),
        grouping="," if "," in integer.strip(",") else "",
        percent="%" in prefix + suffix,
    )


def _number(value: float, form: _Format) -> str:
    """`value` with the format's decimals and thousands separators, between its literals."""
    digits = _rounded(abs(value), form.decimals, form.grouping)
    sign = "-" if value < 0 and any(c not in "0.," for c in digits) else ""
    return f"{sign}{form.prefix}{digits}{form.suffix}".strip()


def _rounded(value: float, decimals: int, grouping: str) -> str:
    """`value` (not negative) to `decimals` places, a tie rounded up as a spreadsheet rounds
    it (2.675 to 2.68, where the float nearest 2.675 is a little under it)."""
    written = repr(value)
    _, point, fraction = written.partition(".")
    if point and "e" not in written and len(fraction) == decimals + 1 and fraction[-1] == "5":
        exact = Decimal(written).quantize(Decimal(1).scaleb(-decimals), ROUND_HALF_UP)
        return f"{exact:{grouping}f}"
    return f"{value:{grouping}.{decimals}f}"


def _moment(value: float, letters: str) -> str | None:
    """A date serial number as an ISO date, a time of day, or both, by what `letters` (the
    format's pattern, lower case) shows; None outside the calendar a sheet can show."""
    if not 0 <= value < _LAST_DAY:
        return None
    moment = _EPOCH + datetime.timedelta(seconds=round(value * 86400))
    has_time = "h" in letters or "s" in letters
    time = moment.strftime("%H:%M:%S" if "s" in letters else "%H:%M")
    has_date = "d" in letters or "y" in letters or ("m" in letters and not has_time)
    if has_date and has_time:
        return f"{moment.date().isoformat()} {time}"
    return moment.date().isoformat() if has_date else time
