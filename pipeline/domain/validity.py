"""A link group's timeline in world time, from what its events asserted (migration 0050).

A group is the links one timeline covers: for a functional relation type the source's links of
that type (at most one target holds at any time), for any other the one link. Each event about
the group asserts one thing: "from `valid_from` (None: always) the link to `to_id` holds, until
`asserted_to` (None: still)" (a put) or "from `valid_from` it does not hold" (a delete, dated by
its `valid_to`). The versions are the effective intervals:

- an assertion with the same `valid_from` and the same link as an earlier one replaces it (a
  correction);
- a holding assertion ends at the earlier of its `asserted_to` and the `valid_from` of the next
  assertion that cuts it: the group's next put (any target in a functional group), or the next
  delete of the same link;
- a delete's version says the link did not hold from its time on (`state` ended, no end).

The timeline depends on the set of assertions, not on the order they arrived in (except that the
later of two same-time puts wins); what the system believed when is the store's (recorded and
invalidated times). `diff` says which believed versions a new timeline invalidates and which
versions it inserts.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeVar

State = Literal["holds", "ended"]
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Assertion:
    """What one event said about one link of the group."""

    to_id: uuid.UUID
    state: State
    valid_from: datetime | None
    asserted_to: datetime | None = None  # a delete's is None
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Version:
    """One effective interval of one link of the group (`valid_to` <= `asserted_to`)."""

    to_id: uuid.UUID
    state: State
    valid_from: datetime | None
    valid_to: datetime | None
    asserted_to: datetime | None
    meta: Mapping[str, Any]
    # the assertion it comes from (not part of what the version says)
    origin: Assertion = field(compare=False)

    def assertion(self) -> Assertion:
        """The assertion this version keeps (a believed version is read back as one)."""
        return Assertion(self.to_id, self.state, self.valid_from, self.asserted_to, self.meta)

    def same(self, other: Version) -> bool:
        """Whether the two say the same (meta compared as JSON)."""
        return (self.to_id, self.state, self.valid_from, self.valid_to, self.asserted_to) == \
            (other.to_id, other.state, other.valid_from, other.valid_to, other.asserted_to) \
            and _canonical(self.meta) == _canonical(other.meta)


def _canonical(meta: Mapping[str, Any]) -> str:
    return json.dumps(meta, sort_keys=True, default=str)


def _start(valid_from: datetime | None) -> tuple[int, datetime | None]:
    """Sort key of a start: None (always) before every time."""
    return (0, None) if valid_from is None else (1, valid_from)


def _cuts(later: Assertion, earlier: Assertion, functional: bool) -> bool:
    if later.state == "holds":
        return functional or later.to_id == earlier.to_id
    return later.to_id == earlier.to_id


def timeline(assertions: Sequence[Assertion], *, functional: bool) -> list[Version]:
    """The group's versions from its assertions (in the order they arrived), ordered by start
    (ties by arrival). An assertion cut to nothing (a same-time put of another target came
    later) leaves no version."""
    kept: dict[tuple[tuple[int, datetime | None], uuid.UUID], tuple[int, Assertion]] = {}
    for n, assertion in enumerate(assertions):
        # a correction: the later of two assertions with one start about one link
        kept[(_start(assertion.valid_from), assertion.to_id)] = (n, assertion)
    ordered = [a for _, a in sorted(kept.values(),
                                    key=lambda item: (_start(item[1].valid_from), item[0]))]
    versions: list[Version] = []
    for i, a in enumerate(ordered):
        if a.state == "ended":
            versions.append(Version(a.to_id, "ended", a.valid_from, None, None, a.meta, a))
            continue
        end = a.asserted_to
        cutter = next((b for b in ordered[i + 1:] if _cuts(b, a, functional)), None)
        if cutter is not None:
            if cutter.valid_from is None:
                continue  # both start at "always": the later one holds
            if end is None or cutter.valid_from < end:
                end = cutter.valid_from
        if end is not None and a.valid_from is not None and end <= a.valid_from:
            continue
        versions.append(Version(a.to_id, "holds", a.valid_from, end, a.asserted_to, a.meta, a))
    return versions


def holding_at(versions: Sequence[Version], at: datetime) -> dict[uuid.UUID, Version]:
    """The holding version of each link of the group at world time `at`."""
    return {v.to_id: v for v in versions if v.state == "holds"
            and (v.valid_from is None or v.valid_from <= at)
            and (v.valid_to is None or v.valid_to > at)}


def undated_put(believed: Sequence[Version], put: Assertion, at: datetime) -> Assertion | None:
    """What a put that states no validity asserts, at record time `at`: on a group without
    history, that the link always held (as links did before validity existed); on one with
    history, that it holds from `at` (a link deleted before is put again; a functional
    group's new target takes over now). None: the link already holds at `at`, open-ended, with
    the same meta, so the put changes nothing."""
    if not believed:
        return put
    now = holding_at(believed, at).get(put.to_id)
    if now is not None and now.valid_to is None and _canonical(now.meta) == _canonical(put.meta):
        return None
    return Assertion(put.to_id, "holds", at, None, put.meta)


@dataclass(frozen=True)
class Change:
    """What a new timeline does to the believed versions: the keys of those it invalidates, and
    the versions it inserts (each from the assertion in its `origin`)."""

    invalidate: list[Any]
    insert: list[Version]


def diff(believed: Sequence[tuple[K, Version]], wanted: Sequence[Version]) -> Change:
    """Match the wanted versions against the believed ones (keyed by `K`): a believed version
    that says the same stays; the others are invalidated, and the wanted ones not believed are
    inserted."""
    left = list(believed)
    insert: list[Version] = []
    for version in wanted:
        match = next((n for n, (_, b) in enumerate(left) if b.same(version)), None)
        if match is None:
            insert.append(version)
        else:
            del left[match]
    return Change([key for key, _ in left], insert)


def recompute(believed: Sequence[tuple[K, Version]], new: Assertion | None, *,
              functional: bool, retract: uuid.UUID | None = None) -> tuple[list[Version], Change]:
    """The group's timeline once `new` arrives (None: none) and, with `retract`, that link's
    assertions are withdrawn; and its change to the believed versions. The believed versions
    are the group's assertions so far (ordered by start, then by key)."""
    kept = sorted(believed, key=lambda item: (_start(item[1].valid_from), repr(item[0])))
    assertions = [v.assertion() for _, v in kept if v.to_id != retract]
    if new is not None:
        assertions.append(new)
    versions = timeline(assertions, functional=functional)
    return versions, diff(believed, versions)
