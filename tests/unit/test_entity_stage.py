"""The extraction stage's pure parts: entity ids, the co-occurrence rule, and which mentions of an
extractor's answer the stage keeps."""

from __future__ import annotations

import uuid

from hypothesis import given, strategies as st

from pipeline.domain.mentions import Extraction, Mention, Triple
from pipeline.entities.ids import counted_entities, entity_id, pairs
from pipeline.entities.stage import valid_mentions
from pipeline.entities.store.extraction import RowText
from pipeline.entities.writeback import mention_keys

NS = uuid.UUID(int=1)
ids = st.uuids()


def test_entity_ids_are_derived_per_namespace() -> None:
    assert entity_id(NS, "ada lovelace") == entity_id(NS, "ada lovelace")
    assert entity_id(NS, "ada lovelace") != entity_id(uuid.UUID(int=2), "ada lovelace")
    assert entity_id(NS, "ada lovelace") != entity_id(NS, "ada")


def test_counted_entities_prefer_the_most_mentioned_then_the_smallest_id() -> None:
    a, b, c = uuid.UUID(int=3), uuid.UUID(int=2), uuid.UUID(int=1)
    assert counted_entities({a: 3, b: 1, c: 1}, 2) == [a, c]
    assert counted_entities({a: 3, b: 1, c: 1}, 10) == [a, c, b]


@given(st.dictionaries(ids, st.integers(min_value=1, max_value=5), max_size=12),
       st.integers(min_value=2, max_value=6))
def test_pairs_are_ordered_distinct_and_within_the_cap(counts: dict[uuid.UUID, int],
                                                       cap: int) -> None:
    kept = counted_entities(counts, cap)
    found = pairs(kept)
    assert len(kept) == min(cap, len(counts))
    assert len(found) == len(kept) * (len(kept) - 1) // 2
    assert all(a < b and a in kept and b in kept for a, b in found)
    # the same counts in any order give the same entities (every worker agrees)
    assert counted_entities(dict(reversed(list(counts.items()))), cap) == kept


def row(**fields: str) -> RowText:
    return RowText(uuid.UUID(int=9), NS, uuid.UUID(int=9), "h", None, tuple(fields.items()))


def m(name: str, field: str, start: int, end: int, text: str, label: str = "NAME") -> Mention:
    return Mention(name=name, label=label, field=field, start=start, end=end, text=text)


def test_valid_mentions_drop_what_the_port_forbids_and_keep_the_rest() -> None:
    r = row(title="Ada met Babbage", content="(...)")
    good = m("Ada", "title", 0, 3, "Ada")
    found = Extraction([
        good,
        m("Babbage", "title", 8, 15, "Babbage"),
        m("Ada", "summary", 0, 3, "Ada"),  # a field the row does not have
        m("Ada", "title", 0, 99, "Ada"),  # out of range
        m("Ada", "title", 1, 4, "Ada"),  # text is not the span
        m("(...)", "content", 0, 5, "(...)"),  # normalises to nothing
        m("A\x00da", "title", 0, 3, "Ada"),  # Postgres cannot store NUL
        m("Ada", "title", 0, 3, "Ada", label=""),
    ], [Triple("Ada", "met", "Babbage"), Triple("Ada", "m\x00et", "Babbage")])
    kept = valid_mentions(r, found)
    assert [(x.name, x.start) for x in kept.mentions] == [("Ada", 0), ("Babbage", 8)]
    assert kept.triples == [Triple("Ada", "met", "Babbage")]


def test_mention_keys_are_normalised_and_keep_the_first_mention() -> None:
    r = row(title="The Beatles and the beatles")
    first = m("The Beatles", "title", 0, 11, "The Beatles")
    found = Extraction([first, m("the beatles", "title", 16, 27, "the beatles")])
    assert mention_keys([(r, found)]) == {(NS, "beatles", ""): first}


def test_a_model_label_is_part_of_the_key_a_shape_label_is_not() -> None:
    r = row(title="Jordan met Jordan in Jordan")
    person = m("Jordan", "title", 0, 6, "Jordan", label="PERSON")
    country = m("Jordan", "title", 21, 27, "Jordan", label="GPE")
    quoted = m("Jordan", "title", 11, 17, "Jordan", label="QUOTED")
    keys = mention_keys([(r, Extraction([person, quoted, country]))])
    assert keys == {(NS, "jordan", "PERSON"): person, (NS, "jordan", ""): quoted,
                    (NS, "jordan", "GPE"): country}
    # the untyped id is the one entities had before classes were part of the identity
    assert entity_id(NS, "jordan") == entity_id(NS, "jordan", "")
    assert len({entity_id(*key) for key in keys}) == 3
