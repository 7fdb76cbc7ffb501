"""One namespace's entity layer in memory, as the PPR walk reads it: `EntitySnapshot.hop`
answers exactly what `PgEntityGraph.hop` answers on the same data, with no SQL.

Held: entities (id, live row count, live) and rows (id, promoted object, part, live) numbered
in id order at the build, the row <-> entity incidence as two CSR arrays (scipy's layout:
`indptr`, `indices`; each entity's rows in row id order, each row's entities in entity id
order, as the SQL walk reads them), and the walkable edges per entity. Changes (`apply`)
replace an entity's or a row's incidence list by an override array and append keys first seen
after the build; the CSR arrays are never rewritten in place, so an answer never sees half a
change.
"""

from __future__ import annotations

import bisect
import uuid
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from pipeline.domain.entity_reads import EntityLink, Hop, RowMention
from pipeline.domain.entity_snapshot import KeyState, SnapshotBuild, SnapshotLink

IntArray = npt.NDArray[np.int64]
# Per key held (entities and rows): the id object, its dict entry and list slots; an estimate
# for the memory bound (measured with tracemalloc at 100k parts: see docs/operations.md).
KEY_BYTES = 260
LINK_BYTES = 200
_Link = tuple[int, int, str, str | None, str]  # from, to (entity numbers), type, status, predicate


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
        self.e_count: list[int] = data.entity_counts.tolist()
        self.e_live: list[bool] = data.entity_live.tolist()
        self.r_keys = [r.row_id for r in data.rows]
        self.r_index = {key: i for i, key in enumerate(self.r_keys)}
        self.r_object = [r.object_id for r in data.rows]
        self.r_part = [r.is_part for r in data.rows]
        self._r_live = np.zeros(max(16, len(data.rows)), dtype=bool)
        self._r_live[: len(data.rows)] = [r.live for r in data.rows]
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

    def live_row(self, row_id: uuid.UUID) -> bool:
        """Whether the row is known and live."""
        row = self.r_index.get(row_id)
        return row is not None and bool(self._r_live[row])

    async def hop(self, namespace: uuid.UUID, entity_ids: Sequence[uuid.UUID],
                  row_ids: Sequence[uuid.UUID], per_entity: int, link_limit: int) -> Hop:
        """`EntityHops.hop` on the snapshot (no await inside: a refresh never interleaves)."""
        hop = Hop([], [], [])
        if namespace != self.namespace:
            return hop
        cap = max(per_entity, 0)
        wanted: list[int] = []
        for entity_id in sorted(entity_ids):
            e = self.e_index.get(entity_id)
            if e is None or not self.e_live[e]:
                continue
            wanted.append(e)
            rows = self._rows(e)
            count = self.e_count[e]
            for r in rows[self._r_live[rows]][:cap].tolist():
                hop.rows_of.append(RowMention(self.r_keys[r], self.r_object[r], self.r_part[r],
                                              entity_id, count))
        for row_id in sorted(row_ids):
            r = self.r_index.get(row_id)
            if r is None or not self._r_live[r]:
                continue
            obj, part = self.r_object[r], self.r_part[r]
            for e in self._ents(r).tolist():
                if self.e_live[e]:
                    hop.entities_of.append(RowMention(row_id, obj, part, self.e_keys[e],
                                                      self.e_count[e]))
        links = {link for e in (self.e_index.get(i) for i in entity_ids) if e is not None
                 for link in self._links.get(e, ())
                 if self.e_live[link[0]] and self.e_live[link[1]]}
        keys = self.e_keys
        for a, b, kind, status, _ in sorted(
                links, key=lambda x: (keys[x[0]], keys[x[1]], x[2], x[3] or "", x[4])
                )[: max(link_limit, 0)]:
            hop.links.append(EntityLink(keys[a], keys[b], kind, status, self.e_count[a],
                                        self.e_count[b]))
        return hop

    # -- changes ---------------------------------------------------------------------------

    def _entity(self, entity_id: uuid.UUID) -> int:
        e = self.e_index.get(entity_id)
        if e is None:  # first seen after the build: not live until its state is read
            e = len(self.e_keys)
            self.e_index[entity_id] = e
            self.e_keys.append(entity_id)
            self.e_count.append(0)
            self.e_live.append(False)
        return e

    def _row(self, row_id: uuid.UUID, object_id: uuid.UUID, is_part: bool) -> int:
        r = self.r_index.get(row_id)
        if r is None:
            r = len(self.r_keys)
            self.r_index[row_id] = r
            self.r_keys.append(row_id)
            self.r_object.append(object_id)
            self.r_part.append(is_part)
            if r >= len(self._r_live):
                grown = np.zeros(2 * len(self._r_live), dtype=bool)
                grown[: len(self._r_live)] = self._r_live
                self._r_live = grown
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
        seen: set[uuid.UUID] = set()
        for row in state.rows:
            r = self._row(row.row_id, row.object_id, row.is_part)
            self.r_object[r], self.r_part[r] = row.object_id, row.is_part
            self._r_live[r] = row.live
            seen.add(row.row_id)
        for gone in state.asked_rows - seen:  # no longer exists
            known = self.r_index.get(gone)
            if known is not None:
                self._r_live[known] = False
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
        """An estimate of the memory held: the arrays, plus per key and per edge."""
        arrays = (self._rows_ptr.nbytes + self._rows_idx.nbytes + self._ents_ptr.nbytes
                  + self._ents_idx.nbytes + self._r_live.nbytes
                  + sum(a.nbytes for a in self._rows_over.values())
                  + sum(a.nbytes for a in self._ents_over.values()))
        links = sum(len(v) for v in self._links.values()) // 2
        return (arrays + KEY_BYTES * (len(self.e_keys) + len(self.r_keys))
                + LINK_BYTES * links)

    def counts(self) -> dict[str, int]:
        """Keys held: entities, rows, overrides (changed since the build), edges."""
        return {"entities": len(self.e_keys), "rows": len(self.r_keys),
                "overrides": len(self._rows_over) + len(self._ents_over),
                "links": sum(len(v) for v in self._links.values()) // 2}
