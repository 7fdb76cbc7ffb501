"""The resolver's pure decisions: the labelled pair set (no false merge), the rules the issue
sets (spelling never merges, numbers never match, homonyms are never joined, acronyms are a
proposal), the answer's reasons, and the lookup keys."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from pipeline.domain.resolution import CandidateRow
from pipeline.entities.likeness import SPELLING_CAP, compare, edit_similarity, trigram_similarity
from pipeline.entities.names import numbers
from pipeline.entities.resolver import (
    DISTINCT,
    MERGE,
    POSSIBLY_SAME,
    ResolverConfig,
    decide,
    pair_decision,
)
from pipeline.entities.resolving import lookup

PAIRS = Path(__file__).resolve().parents[1] / "data" / "resolution_pairs.jsonl"
CONFIG = ResolverConfig()


def _pairs() -> list[dict[str, str]]:
    return [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines() if line]


def _decision(pair: dict[str, str]) -> str:
    return pair_decision(compare(pair["a"], pair["b"], label_a=pair["label_a"],
                                 label_b=pair["label_b"]), CONFIG)


def test_the_labelled_set_is_large_and_varied() -> None:
    pairs = _pairs()
    assert len(pairs) >= 200
    kinds = Counter(p["kind"] for p in pairs)
    assert {"numbered", "version", "acronym", "homonym", "spelling", "accent", "identifier",
            "nickname"} <= set(kinds)
    assert all(p["expected"] in (MERGE, POSSIBLY_SAME, DISTINCT) for p in pairs)


def test_no_false_merge_on_the_labelled_set() -> None:
    got = [(p, _decision(p)) for p in _pairs()]
    false_merges = [(p["a"], p["b"]) for p, d in got if d == MERGE and p["expected"] != MERGE]
    assert false_merges == []
    # and the rules find most of what they should: a floor, so a regression shows
    merges = [d for p, d in got if p["expected"] == MERGE]
    held = [d for p, d in got if p["expected"] == POSSIBLY_SAME]
    assert merges.count(MERGE) / len(merges) >= 0.9
    assert held.count(POSSIBLY_SAME) / len(held) >= 0.75


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=30)


@given(names, names)
def test_spelling_alone_never_reaches_the_merge_threshold(a: str, b: str) -> None:
    found = compare(a, b)
    if found is not None and found.method == "spelling":
        assert found.confidence <= SPELLING_CAP < CONFIG.merge_threshold


@given(names, st.integers(0, 999), st.integers(0, 999))
def test_names_that_differ_in_a_number_are_never_proposed(stem: str, x: int, y: int) -> None:
    a, b = f"{stem} {x}", f"{stem} {y}"
    if numbers(a) != numbers(b):
        assert _decision({"a": a, "b": b, "label_a": "NAME", "label_b": "NAME"}) == DISTINCT


@pytest.mark.parametrize(("a", "b", "method", "decision"), [
    ("Amendment 16", "Amendment 17", "spelling", DISTINCT),
    ("Python 3.11", "Python 3.12", "spelling", DISTINCT),
    ("NASA", "National Aeronautics and Space Administration", "initials", POSSIBLY_SAME),
    ("N.A.S.A.", "NASA", "fold", MERGE),
    ("São Paulo", "Sao Paulo", "fold", MERGE),
    ("parseHttpRequest", "parse_http_request", "segments", POSSIBLY_SAME),
    ("get_user", "get_users", None, DISTINCT),
    ("Bill Gates", "William Gates", "nickname", POSSIBLY_SAME),
    ("Acme", "Acme Inc.", "prefix", POSSIBLY_SAME),
    ("C++", "C#", "spelling", DISTINCT),
])
def test_rules(a: str, b: str, method: str | None, decision: str) -> None:
    found = compare(a, b)
    assert (found.method if found else None) == method
    assert pair_decision(found, CONFIG) == decision


def test_homonyms_are_candidates_but_never_joined() -> None:
    found = compare("Jordan", "Jordan", label_a="PERSON", label_b="GPE")
    assert found is not None and found.confidence < CONFIG.merge_threshold
    assert pair_decision(found, CONFIG) == DISTINCT
    # shape labels of the heuristic extractor are no such conflict
    assert compare("NASA", "National Aeronautics and Space Administration",
                   label_a="ACRONYM", label_b="NAME") is not None


def _row(name: str, via: str = "name", sim: float = 0.0, matched: str | None = None,
         source: str | None = None, label: str = "NAME") -> CandidateRow:
    return CandidateRow(uuid.uuid5(uuid.NAMESPACE_DNS, name), name, label, 1, matched or name,
                        via, sim, source)


def test_answers_and_their_reasons() -> None:
    assert decide("x", [], CONFIG).reason == "no_candidates"
    low = decide("Amendment 17", [_row("Amendment 16", sim=0.7)], CONFIG)
    assert low.reason == "below_threshold" and low.candidates[0].numbers_differ
    tie = decide("Jordan", [_row("Michael Jordan", "alias", 1.0, "Jordan", "surface", "PERSON"),
                            _row("Jordan River", "alias", 1.0, "Jordan", "surface", "LOC")],
                 CONFIG)
    assert tie.reason == "tie" and len(tie.candidates) == 2
    alias = decide("Big Blue", [_row("IBM", "alias", 1.0, "Big Blue", "manual")], CONFIG)
    assert alias.entity is not None and (alias.entity.method, alias.entity.confidence) == (
        "alias", 0.98)
    near = decide("rendering subsystem", [_row("Graphics Pipeline", "embedding", 0.9),
                                          _row("Billing", "embedding", 0.2)], CONFIG,
                  skipped=[])
    assert near.entity is not None and near.entity.method == "embedding"
    assert [c.name for c in near.candidates] == ["Graphics Pipeline"]  # under the floor: none


def test_lookup_keys_reach_other_spellings_of_the_name() -> None:
    keys = lookup("parseHttpRequest").keys
    assert {"parse_http_request", "parse http request", "parsehttprequest"} <= set(keys)
    assert "n.a.s.a" in lookup("NASA").keys
    assert "nasa" in lookup("National Aeronautics and Space Administration").keys
    assert "acme" in lookup("Acme Inc.").keys
    assert lookup("DoD").acronym == "dod"
    assert lookup("Acme Robotics").acronym is None
    assert lookup("50%_off").prefix == "50\\%\\_off %"


def test_similarities() -> None:
    assert edit_similarity("gandhi", "ghandi") == pytest.approx(1 - 2 / 6)
    assert edit_similarity("abcd", "abdc") == pytest.approx(0.75)  # a swap costs one
    assert trigram_similarity("word", "word") == 1.0
    assert trigram_similarity("", "word") == 0.0
