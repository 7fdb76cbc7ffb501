"""The temporal benchmark's corpus and its truth: people whose employer (`works_at`, functional)
changes over ten years, as the link events that say so, and who worked where at any time.

Each person has 1 to 5 stints, at distinct companies, starting on distinct days between
2015-01-01 and 2024-12-31. A stint is a `link.put` from its start (`valid_from`); it holds until
the next stint starts (the functional type cuts it), or earlier when its put says so
(`valid_to`, a quarter of the stints: a gap follows), or when a `link.delete` ends it (`valid_to`
= the day it stopped, a few stints). Every event is published in random order, a delete before
its link's put too (its end is recorded and the put holds until then). The truth is computed
here from the stints alone, not by the pipeline's timeline code.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

EPOCH = datetime(2015, 1, 1, tzinfo=UTC)
YEARS_DAYS = 3652  # ten years of days
RELATION = "works_at"
_IDS = uuid.UUID("0e6c4f0a-8d3b-4c55-9a1e-7b2f3c4d5e6f")


@dataclass(frozen=True)
class Stint:
    company: int
    start: datetime
    end: datetime | None  # None: still
    put_to: datetime | None  # the put's own valid_to
    deleted_at: datetime | None  # a delete's valid_to


@dataclass(frozen=True)
class Corpus:
    namespace: uuid.UUID
    persons: list[uuid.UUID]
    companies: list[uuid.UUID]
    stints: list[list[Stint]]  # per person, by start

    def holding(self, person: int, at: datetime) -> Stint | None:
        """The stint of `person` holding at world time `at` (None: no employer then)."""
        for stint in self.stints[person]:
            if stint.start <= at and (stint.end is None or at < stint.end):
                return stint
        return None

    def note(self, person: int, stint: Stint) -> str:
        """A stint's link note: the person's and company's tokens, findable by either."""
        return f"employment p{person:04d} with c{stint.company:03d}"


def _day(n: int) -> datetime:
    return EPOCH + timedelta(days=n)


def generate(persons: int, companies: int, seed: int) -> Corpus:
    """The corpus (see the module's docstring), the same for the same arguments."""
    rng = random.Random(seed)
    ns = uuid.uuid5(_IDS, f"temporal-{seed}")
    person_ids = [uuid.uuid5(ns, f"person-{i}") for i in range(persons)]
    company_ids = [uuid.uuid5(ns, f"company-{i}") for i in range(companies)]
    stints: list[list[Stint]] = []
    for _ in range(persons):
        n = rng.randint(1, 5)
        starts = sorted(rng.sample(range(YEARS_DAYS), n))
        chosen = rng.sample(range(companies), n)
        mine: list[Stint] = []
        for i, (start, company) in enumerate(zip(starts, chosen, strict=True)):
            bound = starts[i + 1] if i + 1 < n else start + rng.randint(60, 2000)
            open_ended = i + 1 == n
            put_to = deleted = None
            if bound - start >= 3 and rng.random() < 0.25:
                put_to = rng.randint(start + 1, bound - 1)
            elif bound - start >= 3 and rng.random() < 0.05:
                deleted = rng.randint(start + 1, bound - 1)
            end_day = put_to or deleted or (None if open_ended else bound)
            mine.append(Stint(company, _day(start), None if end_day is None else _day(end_day),
                              None if put_to is None else _day(put_to),
                              None if deleted is None else _day(deleted)))
        stints.append(mine)
    return Corpus(ns, person_ids, company_ids, stints)


def _stamp(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def object_events(corpus: Corpus) -> list[dict[str, Any]]:
    """The object puts: every company, then every person."""
    out = [_envelope(corpus, "object.put", {"id": str(c), "kind": "company",
                                            "title": f"Company c{i:03d}"})
           for i, c in enumerate(corpus.companies)]
    out += [_envelope(corpus, "object.put", {"id": str(p), "kind": "person",
                                             "title": f"Person p{i:04d}"})
            for i, p in enumerate(corpus.persons)]
    return out


def link_events(corpus: Corpus, rng: random.Random) -> list[dict[str, Any]]:
    """Every stint's put and delete, shuffled (published out of order: a dated delete may come
    before the put it ends)."""
    keyed: list[tuple[float, dict[str, Any]]] = []
    for person, mine in enumerate(corpus.stints):
        for stint in mine:
            ends = {"from": str(corpus.persons[person]), "relation_type": RELATION,
                    "to": str(corpus.companies[stint.company])}
            data: dict[str, Any] = {**ends, "valid_from": _stamp(stint.start),
                                    "meta": {"note": corpus.note(person, stint)}}
            if stint.put_to is not None:
                data["valid_to"] = _stamp(stint.put_to)
            at = rng.random()
            keyed.append((at, _envelope(corpus, "link.put", data)))
            if stint.deleted_at is not None:
                keyed.append((rng.random(), _envelope(
                    corpus, "link.delete", {**ends, "valid_to": _stamp(stint.deleted_at)})))
    keyed.sort(key=lambda item: item[0])
    return [event for _, event in keyed]


def _envelope(corpus: Corpus, event_type: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"specversion": "1.0", "id": str(uuid.uuid4()), "source": "bench.temporal",
            "type": f"brainstream.{event_type}", "time": _stamp(datetime.now(UTC)),
            "datacontenttype": "application/json", "namespace": str(corpus.namespace),
            "data": data}


def questions(corpus: Corpus, n: int, rng: random.Random) -> list[tuple[int, datetime]]:
    """`n` (person, world time) pairs: a person at random, and mostly (85 %) a time within
    the person's working years, else a time between a year before the first day and a year
    after the last (before anyone's first stint, in gaps, after the end)."""
    lo = (EPOCH - timedelta(days=365)).timestamp()
    hi = (EPOCH + timedelta(days=YEARS_DAYS + 365)).timestamp()
    out = []
    for _ in range(n):
        person = rng.randrange(len(corpus.persons))
        mine = corpus.stints[person]
        last = mine[-1].end or mine[-1].start + timedelta(days=730)
        a, b = ((mine[0].start.timestamp(), last.timestamp()) if rng.random() < 0.85
                else (lo, hi))
        out.append((person, datetime.fromtimestamp(rng.uniform(a, b), UTC)
                    .replace(microsecond=0)))
    return out
