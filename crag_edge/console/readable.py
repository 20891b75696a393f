"""Numbers as a person reads them: sizes in kB, MB and GB, times as a local date and how long
ago. The `--json` output of the same commands keeps the machine values (bytes, unix seconds)."""

from __future__ import annotations

import datetime as dt
import time

_UNITS = ((1e9, "GB"), (1e6, "MB"), (1e3, "kB"))
_AGES = (
    (86400 * 365, "year"),
    (86400 * 30, "month"),
    (86400, "day"),
    (3600, "hour"),
    (60, "minute"),
)


def readable_size(size: int | None) -> str:
    """`512 bytes`, `12.3 kB`, `4.5 MB` (decimal units, as disks are sold); `-` for none."""
    if size is None:
        return "-"
    for scale, unit in _UNITS:
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} byte" if size == 1 else f"{size} bytes"


def readable_time(ts: float | None, now: float | None = None) -> str:
    """`2026-11-27 16:05 (3 hours ago)` in local time, to the minute; `never` for none."""
    if not ts:
        return "never"
    return f"{readable_date(ts)} ({age(max((time.time() if now is None else now) - ts, 0.0))})"


def readable_date(ts: float) -> str:
    """`2026-11-27 16:05`: local time, to the minute (a table's column)."""
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


def age(seconds: float) -> str:
    """`just now`, `1 minute ago`, `5 days ago`: the largest whole unit."""
    for scale, unit in _AGES:
        count = int(seconds // scale)
        if count:
            return f"{count} {unit}{'s' if count > 1 else ''} ago"
    return "just now"
