"""The time a query asks about: a small rule set over English time expressions, resolved to one
range of message times [since, until) (UTC).

- absolute: "8 May 2023", "May 8, 2023", "May 2023", "in 2022";
- a month or season without a year ("in June", "last May", "this summer"): the latest such month
  (season) that began at or before the anchor, the last message of the searched sessions (or now,
  if earlier): a memory's "June" is the June it talks about;
- relative to now (the request's time): "today", "yesterday", "N days / weeks / months / years
  ago" (N a number, a word up to twelve, "a", "a couple of", "a few"), "this / last week
  / month / year".

Month names match capitalised (or, but for "May" and "March", in lower case too). Expressions
anchored on an event ("two weeks before the trip") resolve to nothing: the event's own date is not
known before the search. The first expression found in this order wins: day, month of a year,
year, relative, month or season alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december"]
_AMBIGUOUS = {"may", "march"}  # ordinary words in lower case
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}  # first month; 3 long
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
            "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
            "a couple of": 2, "a few": 3}
_MONTH = r"(?P<month>[A-Za-z]{3,9})"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_DAY_RE = re.compile(rf"\b(?:(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}"
                     rf"|(?P<month2>[A-Za-z]{{3,9}})\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?,?\s+"
                     rf"(?P<year2>(?:19|20)\d\d))\b")
_MONTH_YEAR_RE = re.compile(rf"\b{_MONTH}\s+(?:of\s+)?{_YEAR}\b")
_YEAR_RE = re.compile(rf"(?<![\d-]){_YEAR}(?![\d-])")
_AGO_RE = re.compile(r"\b(?P<n>\d{1,3}|a couple of|a few|an?|one|two|three|four|five|six|seven"
                     r"|eight|nine|ten|eleven|twelve)\s+(?P<unit>day|week|month|year)s?\s+ago\b",
                     re.IGNORECASE)
_THIS_LAST_RE = re.compile(r"\b(?P<which>this|last|past)\s+(?P<unit>week|month|year)\b",
                           re.IGNORECASE)
_DAY_WORD_RE = re.compile(r"\b(?P<word>today|yesterday)\b", re.IGNORECASE)
_BARE_MONTH_RE = re.compile(r"\b[A-Za-z]{3,9}\b")
_SEASON_RE = re.compile(r"\b(?P<season>spring|summer|autumn|fall|winter)\b", re.IGNORECASE)


@dataclass(frozen=True)
class TimeRange:
    """Message times [since, until) a query asks about, and the words that said so."""

    since: datetime
    until: datetime
    text: str


def _month(word: str | None) -> int | None:
    if not word:
        return None
    lower = word.lower()
    if lower not in _MONTHS or (lower in _AMBIGUOUS and not word[0].isupper()):
        return None
    return _MONTHS.index(lower) + 1


def _month_start(year: int, month: int) -> datetime:
    year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
    return datetime(year, month, 1, tzinfo=UTC)


def _day(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def time_range(query: str, *, now: datetime, anchor: datetime | None = None
               ) -> TimeRange | None:
    """The range of message times `query` asks about, or None (module docstring)."""
    anchor = min(anchor, now) if anchor is not None else now
    for match in _DAY_RE.finditer(query):
        month = _month(match["month"] or match["month2"])
        day, year = int(match["d1"] or match["d2"]), int(match["year"] or match["year2"])
        if month is not None:
            try:
                start = datetime(year, month, day, tzinfo=UTC)
            except ValueError:
                continue
            return TimeRange(start, start + timedelta(days=1), match[0])
    for match in _MONTH_YEAR_RE.finditer(query):
        month = _month(match["month"])
        if month is not None:
            start = _month_start(int(match["year"]), month)
            return TimeRange(start, _month_start(start.year, month + 1), match[0])
    if year_match := _YEAR_RE.search(query):
        year = int(year_match["year"])
        return TimeRange(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC),
                         year_match[0])
    relative = _relative(query, now)
    if relative is not None:
        return relative
    for word in _BARE_MONTH_RE.finditer(query):
        month = _month(word[0])
        if month is not None:
            return _latest(month, 1, anchor, word[0])
    if season := _SEASON_RE.search(query):
        return _latest(_SEASONS[season["season"].lower()], 3, anchor, season[0])
    return None


def _latest(month: int, length: int, anchor: datetime, text: str) -> TimeRange:
    """The latest `length`-month span starting in `month` that began at or before `anchor`."""
    start = _month_start(anchor.year, month)
    if start > anchor:
        start = _month_start(anchor.year - 1, month)
    return TimeRange(start, _month_start(start.year, start.month + length), text)


def _relative(query: str, now: datetime) -> TimeRange | None:
    today = _day(now)
    if match := _DAY_WORD_RE.search(query):
        start = today - timedelta(days=match["word"].lower() == "yesterday")
        return TimeRange(start, start + timedelta(days=1), match[0])
    if match := _AGO_RE.search(query):
        raw = match["n"].lower()
        n = int(raw) if raw.isdigit() else _NUMBERS[raw]
        return _back(match["unit"].lower(), n, today, match[0])
    if match := _THIS_LAST_RE.search(query):
        back = 0 if match["which"].lower() == "this" else 1
        return _back(match["unit"].lower(), back, today, match[0])
    return None


def _back(unit: str, n: int, today: datetime, text: str) -> TimeRange:
    """The calendar `unit` (day, week from Monday, month, year) `n` units before today's."""
    if unit == "day":
        start = today - timedelta(days=n)
        return TimeRange(start, start + timedelta(days=1), text)
    if unit == "week":
        start = today - timedelta(days=today.weekday(), weeks=n)
        return TimeRange(start, start + timedelta(weeks=1), text)
    if unit == "month":
        start = _month_start(today.year, today.month - n)
        return TimeRange(start, _month_start(start.year, start.month + 1), text)
    return TimeRange(datetime(today.year - n, 1, 1, tzinfo=UTC),
                     datetime(today.year - n + 1, 1, 1, tzinfo=UTC), text)
