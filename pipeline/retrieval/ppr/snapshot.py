"""One namespace's entity layer in memory, as the PPR stage reads it: `EntitySnapshot.hop`
answers exactly what `PgEntityGraph.hop` answers on the same data, and `match_names` what
`PgEntityGraph.match_names` answers, with no SQL; the array walk (`ppr_arraywalk.py`) reads
its arrays directly (`live_rows_of`, `live_entities_of`, `links_touching`, `e_count`, `r_obj`).

Held: entities (id, live row count, live, name, norm and aliases in a `NameIndex`) and rows
(id, promoted object, part, live) numbered in id order at the build, counts and flags as numpy
arrays, the row <-> entity incidence as two CSR arrays (scipy's layout:
`indptr`, `indices`; each entity's rows in row id order, each row's entities in entity id
order, as the SQL walk reads them), and the walkable edges per entity. Changes (`apply`)
replace an entity's or a row's incidence list by an override array and append keys first seen
after the build; the CSR arrays are never rewritten in place, so an answer never sees half a
change.
"""

from __future__ import annotations

import bisect
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from pipeline.domain.entity_reads import EntityLink, EntityRef, Hop, NameMatch, RowMention
from pipeline.domain.entity_snapshot import (
    ALIAS_BYTES,
    KEY_BYTES,
    LINK_BYTES,
    NAME_BYTES,
    KeyState,
    SnapshotBuild,
    SnapshotLink,
)
from pipeline.retrieval.ppr.model import id_halves
from pipeline.retrieval.ppr.names import NameIndex

IntArray = npt.NDArray[np.int64]
_Link = tuple[int, int, str, str | None, str]  # from, to (entity numbers), type, status, predicate


def _grown(values: npt.NDArray[Any], n: int) -> npt.NDArray[Any]:
    """`values` (length n) with room to append (at least 16 slots)."""
    out = np.zeros(max(16, 2 * n), dtype=values.dtype)
    out[:n] = values[:n]
    return out


def _room(values: npt.NDArray[Any], at: int) -> npt.NDArray[Any]:
    """`values`, doubled when slot `at` is past its end."""
    if at < len(values):
        return values
    return _grown(values, len(values))


def _csr(owners: IntArray, members: IntArray, n: int) -> tuple[IntArray, IntArray]:
    """CSR of distinct (owner, member) pairs, members ascending within an owner."""
    order = np.lexsort((members, owners))
    owners, members = owners[order], members[order]
    if len(owners):
        keep = np.ones(len(owners), dtype=bool)
        keep[1:] = (owners[1:] != owners[:-1]) | (members[1:] != members[:-1])
        owners, members = owners[keep], members[keep]
    indptr = np.searchsorted(owners, np.arange(n + 1)).astype(np.int64)
    return indptr, members.astype(np.int64)


class EntitySnapshot:
    """A namespace's entity layer for the PPR walk; `as_of` is the monotonic time of the read
    it reflects (the build, then each refresh)."""

    def __init__(self, namespace: uuid.UUID, data: SnapshotBuild, as_of: float) -> None:
        self.namespace = namespace
        self.as_of = as_of
        self.xmin = data.xmin
        self.e_keys = list(data.entity_ids)
        self.e_index = {key: i for i, key in enumerate(self.e_keys)}
        self.e_count = _grown(np.asarray(data.entity_counts, dtype=np.int64), len(self.e_keys))
        self.e_live = _grown(np.asarray(data.entity_live, dtype=bool), len(self.e_keys))
        self.r_keys = [r.row_id for r in data.rows]
        self.r_index = {key: i for i, key in enumerate(self.r_keys)}
        self.r_object = [r.object_id for r in data.rows]
        self.r_part = _grown(np.asarray([r.is_part for r in data.rows], dtype=bool),
                             len(self.r_keys))
        self.r_live = _grown(np.asarray([r.live for r in data.rows], dtype=bool),
                             len(self.r_keys))
        # each row's promoted object as a row number (an object is a row of the namespace),
        # so the ranking groups rows by object with array operations
        # each row's id as two unsigned halves (uuid order = their order): the ranking sorts
        # its hits by id with numpy instead of comparing uuid strings
        halves = id_halves(self.r_keys)
        self.r_hi = _grown(halves[:, 0], len(self.r_keys))
        self.r_lo = _grown(halves[:, 1], len(self.r_keys))
        self.r_obj = _grown(np.asarray([self.r_index.get(o, -1) for o in self.r_object],
                                       dtype=np.int64), len(self.r_keys))
        for r in np.flatnonzero(self.r_obj[: len(self.r_keys)] < 0).tolist():
            self.r_obj[r] = self._row(self.r_object[r], self.r_object[r], False)
        # rows and entities are numbered in id order: ascending numbers are the SQL's order
        self._rows_ptr, self._rows_idx = _csr(data.mention_entities, data.mention_rows,
                                              len(self.e_keys))
        self._ents_ptr, self._ents_idx = _csr(data.mention_rows, data.mention_entities,
                                              len(self.r_keys))
        self._rows_over: dict[int, IntArray] = {}
        self._ents_over: dict[int, IntArray] = {}
        self._links: dict[int, set[_Link]] = {}
        for link in data.links:
            self._add_link(link)
        self.names = NameIndex()
        for e, (name, norm) in enumerate(zip(data.entity_names, data.entity_norms,
                                             strict=True)):
            self.names.set_name(e, name, norm)
        aliases: dict[int, list[str]] = {}
        for norm, entity_id in data.aliases:
            known = self.e_index.get(entity_id)
            if known is not None:
                aliases.setdefault(known, []).append(norm)
        for e, norms in aliases.items():
            self.names.set_aliases(e, norms)

    # -- reading ---------------------------------------------------------------------------

    @staticmethod
    def _segment(over: dict[int, IntArray], indptr: IntArray, indices: IntArray, owner: int
                 ) -> IntArray:
        """An owner's incidence list: its override, else its CSR slice (empty for an owner
        first seen after the build)."""
        found = over.get(owner)
        if found is not None:
            return found
        if owner + 1 >= len(indptr):
            return np.empty(0, dtype=np.int64)
        return indices[indptr[owner]: indptr[owner + 1]]

    def _rows(self, entity: int) -> IntArray:
        return self._segment(self._rows_over, self._rows_ptr, self._rows_idx, entity)

    def _ents(self, row: int) -> IntArray:
        return self._segment(self._ents_over, self._ents_ptr, self._ents_idx, row)

    def live_rows_of(self, entity: int, cap: int) -> IntArray:
        """The first `cap` live rows naming the entity, ascending (row id order)."""
        rows = self._rows(entity)
        found: IntArray = rows[self.r_live[rows]][: max(cap, 0)]
        return found

    def live_entities_of(self, row: int) -> IntArray:
        """The live entities the row names, ascending (entity id order)."""
        ents = self._ents(row)
        found: IntArray = ents[self.e_live[ents]]
        return found

    def links_touching(self, entities: Iterable[int], limit: int) -> list[_Link]:
        """The walkable edges with an end among `entities` and both ends live, in the SQL's
        order (from id, to id, type, status, predicate), at most `limit`."""
        links = {link for e in entities for link in self._links.get(e, ())
                 if self.e_live[link[0]] and self.e_live[link[1]]}
        keys = self.e_keys
        return sorted(links, key=lambda x: (keys[x[0]], keys[x[1]], x[2], x[3] or "", x[4])
                      )[: max(limit, 0)]

    def live_row(self, row_id: uuid.UUID) -> bool:
        """Whether the row is known and live."""
        row = self.r_index.get(row_id)
        return row is not None and bool(self.r_live[row])

    def match_names(self, keys: Sequence[str], folds: Sequence[str]) -> list[NameMatch]:
        """`EntityGraph.match_names` on the snapshot: live entities by norm, alias, fold."""
        return [NameMatch(key, method, EntityRef(self.e_keys[e], self.names.names.get(e, ""),
                                                 int(self.e_count[e])))
                for key, method, e in self.names.match(keys, folds) if self.e_live[e]]

    async def hop(self, namespace: uuid.UUID, entity_ids: Sequence[uuid.UUID],
                  row_ids: Sequence[uuid.UUID], per_entity: int, link_limit: int) -> Hop:
        """`EntityHops.hop` on the snapshot (no await inside: a refresh never interleaves)."""
        hop = Hop([], [], [])
        if namespace != self.namespace:
            return hop
        for entity_id in sorted(entity_ids):
            e = self.e_index.get(entity_id)
            if e is None or not self.e_live[e]:
                continue
            count = int(self.e_count[e])
            for r in self.live_rows_of(e, per_entity).tolist():
                hop.rows_of.append(RowMention(self.r_keys[r], self.r_object[r],
                                              bool(self.r_part[r]), entity_id, count))
        for row_id in sorted(row_ids):
            r = self.r_index.get(row_id)
            if r is None or not self.r_live[r]:
                continue
            obj, part = self.r_object[r], bool(self.r_part[r])
            for e in self.live_entities_of(r).tolist():
                hop.entities_of.append(RowMention(row_id, obj, part, self.e_keys[e],
                                                  int(self.e_count[e])))
        asked = [e for e in (self.e_index.get(i) for i in entity_ids) if e is not None]
        for a, b, kind, status, _ in self.links_touching(asked, link_limit):
            hop.links.append(EntityLink(self.e_keys[a], self.e_keys[b], kind, status,
                                        int(self.e_count[a]), int(self.e_count[b])))
        return hop

    # -- changes ---------------------------------------------------------------------------

    def _entity(self, entity_id: uuid.UUID) -> int:
        e = self.e_index.get(entity_id)
        if e is None:  # first seen after the build: not live until its state is read
            e = len(self.e_keys)
            self.e_index[entity_id] = e
            self.e_keys.append(entity_id)
            self.e_count = _room(self.e_count, e)
            self.e_live = _room(self.e_live, e)
        return e

    def _row(self, row_id: uuid.UUID, object_id: uuid.UUID, is_part: bool) -> int:
        r = self.r_index.get(row_id)
        if r is None:
            r = len(self.r_keys)
            self.r_index[row_id] = r
            self.r_keys.append(row_id)
            self.r_object.append(object_id)
            self.r_part, self.r_live = _room(self.r_part, r), _room(self.r_live, r)
            self.r_obj = _room(self.r_obj, r)
            self.r_hi, self.r_lo = _room(self.r_hi, r), _room(self.r_lo, r)
            self.r_hi[r], self.r_lo[r] = id_halves([row_id])[0]
            self.r_part[r] = is_part
            # an object first seen now: known as a row (not live until its state is read)
            self.r_obj[r] = r if object_id == row_id else self._row(object_id, object_id, False)
        return r

    def _add_link(self, link: SnapshotLink) -> None:
        a, b = self._entity(link.from_id), self._entity(link.to_id)
        key = (a, b, link.edge_type, link.status, link.predicate)
        self._links.setdefault(a, set()).add(key)
        self._links.setdefault(b, set()).add(key)

    def apply(self, state: KeyState, as_of: float) -> None:
        """Bring the keys `state` names to their state in it (idempotent: applying a state
        twice leaves the same snapshot)."""
        for entity in state.entities:
            e = self._entity(entity.id)
            self.e_count[e], self.e_live[e] = entity.part_count, entity.live
            if entity.norm:
                self.names.set_name(e, entity.name, entity.norm)
            if entity.aliases is not None:
                self.names.set_aliases(e, entity.aliases)
        seen: set[uuid.UUID] = set()
        for row in state.rows:
            r = self._row(row.row_id, row.object_id, row.is_part)
            self.r_object[r], self.r_part[r] = row.object_id, row.is_part
            self.r_obj[r] = self._row(row.object_id, row.object_id, False)
            self.r_live[r] = row.live
            seen.add(row.row_id)
        for gone in state.asked_rows - seen:  # no longer exists
            known = self.r_index.get(gone)
            if known is not None:
                self.r_live[known] = False
        self._apply_mentions(state.mentions)
        for entity_id, links in state.links.items():
            e = self._entity(entity_id)
            for old in self._links.pop(e, set()):
                other = old[1] if old[0] == e else old[0]
                self._links.get(other, set()).discard(old)
            for link in links:
                self._add_link(link)
        self.as_of = max(self.as_of, as_of)

    def _apply_mentions(self, mentions: dict[uuid.UUID, tuple[uuid.UUID, ...]]) -> None:
        added: dict[int, list[int]] = {}
        removed: dict[int, set[int]] = {}
        for row_id, entity_ids in mentions.items():
            r = self.r_index.get(row_id)
            if r is None:  # not a row of the namespace (read_keys gave no state for it)
                continue
            new = {self._entity(e) for e in entity_ids}
            old = set(self._ents(r).tolist())
            for e in new - old:
                added.setdefault(e, []).append(r)
            for e in old - new:
                removed.setdefault(e, set()).add(r)
            self._ents_over[r] = np.asarray(sorted(new, key=self.e_keys.__getitem__),
                                            dtype=np.int64)
        key = self.r_keys.__getitem__
        for e in set(added) | set(removed):
            gone = removed.get(e, set())
            rows = [r for r in self._rows(e).tolist() if r not in gone]
            for r in added.get(e, ()):
                bisect.insort(rows, r, key=key)  # kept in row id order
            self._rows_over[e] = np.asarray(rows, dtype=np.int64)

    # -- size ------------------------------------------------------------------------------

    def nbytes(self) -> int:
        """An estimate of the memory held: the arrays, plus per key, name, alias and edge (the
        costs `SnapshotSize.nbytes` estimates a build with)."""
        arrays = (self._rows_ptr.nbytes + self._rows_idx.nbytes + self._ents_ptr.nbytes
                  + self._ents_idx.nbytes + self.r_live.nbytes + self.r_part.nbytes
                  + self.r_obj.nbytes + self.r_hi.nbytes + self.r_lo.nbytes
                  + self.e_count.nbytes + self.e_live.nbytes
                  + sum(a.nbytes for a in self._rows_over.values())
                  + sum(a.nbytes for a in self._ents_over.values()))
        links = sum(len(v) for v in self._links.values()) // 2
        return (arrays + KEY_BYTES * (len(self.e_keys) + len(self.r_keys))
                + LINK_BYTES * links + NAME_BYTES * len(self.names)
                + ALIAS_BYTES * self.names.alias_count())

    def counts(self) -> dict[str, int]:
        """Keys held: entities, rows, overrides (changed since the build), edges."""
        return {"entities": len(self.e_keys), "rows": len(self.r_keys),
                "overrides": len(self._rows_over) + len(self._ents_over),
                "links": sum(len(v) for v in self._links.values()) // 2}
