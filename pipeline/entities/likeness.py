"""How alike two entity names are, by rule: the resolver's pure name comparisons.

Every rule compares names through `pipeline/entities/names.py` and answers a `Likeness`: the
rule that matched (`method`) and a confidence in [0, 1]. The confidences are fixed by the rule,
so they mean the same everywhere (docs/entities.md lists them):

- `exact` 1.0: the normalised names are equal;
- `fold` 0.95: equal once case, accents and punctuation are ignored ("São Paulo" / "Sao Paulo"),
  also spacing and leading zeros ("Wi Fi" / "WiFi", "Apollo 011" / "Apollo 11") unless both are
  identifiers, or one is the other spelled out letter by letter ("N.A.S.A." / "NASA"); in a name
  shorter than 4 letters the symbols must agree too ("C++" / "C#");
- `segments` 0.9: the same identifier pieces ("parseHttpRequest" / "parse_http_request"), 0.8
  when one identifier's pieces end the other's ("api/app.py" / "src/api/app.py");
- `initials` 0.9: an acronym and the initials of a name ("NASA" / "National Aeronautics and
  Space Administration"): acronyms are ambiguous, so never a merge on their own;
- `nickname` 0.85: a known short form of the first name, the rest equal ("Bill Gates" /
  "William Gates");
- `prefix` 0.93 when what the longer name adds is a company suffix ("Acme" / "Acme Inc."),
  else 0.6 (one name's words begin or end the other's: a lead, not a proposal);
- `spelling` at most 0.9 (`SPELLING_CAP`): edit and trigram similarity of the folded names.
  Spelling alone never reaches the merge threshold.

Two caps apply after the rule: names whose `numbers()` differ are never the same entity
(`NUMBERS_CAP`), and two names typed with different model labels (PERSON vs ORG) are homonyms
at best (`HOMONYM_CAP` for strong rules, `WEAK_CAP` for the others). A pair of a typed name and
an untyped one (a shape label) is `mixed`: never merged without a person.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from pipeline.entities.names import fold, normalise, numbers, segments

# The labels of the heuristic extractor describe a name's shape, not what it names: two names
# of different shapes ("NASA" ACRONYM, "National Aeronautics..." NAME) can be the same entity.
SHAPE_LABELS = frozenset({"NAME", "ACRONYM", "IDENTIFIER", "QUANTITY", "QUOTED"})

SPELLING_CAP = 0.9
NUMBERS_CAP = 0.3
HOMONYM_CAP = 0.9
WEAK_CAP = 0.5
STRONG_METHODS = frozenset({"exact", "alias", "fold"})

# what is left of a name once its letters, digits, spaces and plain punctuation are removed
_SYMBOLS = re.compile(r"[\w\s.,'\-_/()]+")
_LEADING_ZEROS = re.compile(r"(?<!\d)0+(?=\d)")
_STOP = frozenset({"of", "and", "the", "for", "in", "on", "at", "to", "de", "du", "des", "la",
                   "le", "von", "van", "der", "y", "et", "und"})
_COMPANY = frozenset({"inc", "incorporated", "corp", "corporation", "co", "company", "ltd",
                      "limited", "llc", "plc", "gmbh", "ag", "sa", "nv", "bv", "se", "spa",
                      "srl", "oy", "ab", "as", "pty", "kk", "lp", "llp", "group", "holdings",
                      "holding"})
_NICKNAMES: dict[str, frozenset[str]] = {
    "william": frozenset({"bill", "billy", "will", "willy", "liam"}),
    "robert": frozenset({"bob", "bobby", "rob", "robby", "bert"}),
    "richard": frozenset({"rick", "ricky", "dick", "rich"}),
    "james": frozenset({"jim", "jimmy", "jamie"}),
    "john": frozenset({"jack", "johnny"}),
    "elizabeth": frozenset({"liz", "beth", "lizzie", "betty", "eliza"}),
    "margaret": frozenset({"maggie", "meg", "peggy"}),
    "katherine": frozenset({"kate", "kathy", "katie", "kay"}),
    "catherine": frozenset({"kate", "cathy", "katie"}),
    "michael": frozenset({"mike", "mikey", "mick"}),
    "thomas": frozenset({"tom", "tommy"}),
    "charles": frozenset({"charlie", "chuck"}),
    "edward": frozenset({"ed", "eddie", "ted", "ned"}),
    "anthony": frozenset({"tony"}),
    "joseph": frozenset({"joe", "joey"}),
    "daniel": frozenset({"dan", "danny"}),
    "david": frozenset({"dave", "davy"}),
    "steven": frozenset({"steve"}),
    "stephen": frozenset({"steve"}),
    "christopher": frozenset({"chris"}),
    "matthew": frozenset({"matt"}),
    "nicholas": frozenset({"nick", "nicky"}),
    "alexander": frozenset({"alex", "sasha"}),
    "benjamin": frozenset({"ben", "benny"}),
    "samuel": frozenset({"sam", "sammy"}),
    "jennifer": frozenset({"jen", "jenny"}),
    "patricia": frozenset({"pat", "patty", "trish"}),
    "susan": frozenset({"sue", "susie"}),
    "theodore": frozenset({"ted", "teddy", "theo"}),
    "frederick": frozenset({"fred", "freddie"}),
    "andrew": frozenset({"andy", "drew"}),
    "timothy": frozenset({"tim", "timmy"}),
    "gregory": frozenset({"greg"}),
    "jonathan": frozenset({"jon"}),
    "victoria": frozenset({"vicky", "tori"}),
    "rebecca": frozenset({"becky"}),
    "abraham": frozenset({"abe"}),
    "donald": frozenset({"don", "donnie"}),
    "ronald": frozenset({"ron", "ronnie"}),
    "lawrence": frozenset({"larry"}),
    "harold": frozenset({"harry", "hal"}),
    "henry": frozenset({"hank", "harry"}),
}


# The proposal pass compares each name with dozens of candidates, and names recur across a
# batch: the name functions are pure, so their answers are kept (bounded).
_CACHED = 16_384
# `cap` rounds confidences to 4 places: a rule pruned by a caller's floor keeps this margin
_ROUNDING = 1e-4
_normalise = lru_cache(maxsize=_CACHED)(normalise)
_fold = lru_cache(maxsize=_CACHED)(fold)
_numbers = lru_cache(maxsize=_CACHED)(numbers)


@lru_cache(maxsize=_CACHED)
def _pieces(name: str) -> tuple[str, ...]:
    return tuple(segments(name))


# What the rules read of one folded name, kept with it: a pair's rules then only compare.
@lru_cache(maxsize=_CACHED)
def _words(folded: str) -> tuple[str, ...]:
    return tuple(folded.split())


@lru_cache(maxsize=_CACHED)
def _letters(folded: str) -> str | None:
    """The name's letters joined when it is spelled out one by one ("n a s a"), else None."""
    words = _words(folded)
    return "".join(words) if len(words) > 1 and all(len(w) == 1 for w in words) else None


@lru_cache(maxsize=_CACHED)
def _both_initials(folded: str) -> tuple[str, str]:
    """`initials` without and with the stop words."""
    return initials(folded, keep_stop=False), initials(folded, keep_stop=True)


@dataclass(frozen=True)
class Likeness:
    """Which rule found two names alike, and how sure it is."""

    method: str
    confidence: float
    numbers_differ: bool = False
    homonym: bool = False  # the names' model labels differ (PERSON vs ORG)
    # one name typed by a model, the other only by its shape ("Jordan" in quotes, PERSON
    # "Jordan"): which of a namespace's Jordans it is, a person says (held, never merged)
    mixed: bool = False

    @property
    def proposable(self) -> bool:
        """Whether the pair may ever be merged or held as possibly the same: never when the
        numbers differ, nor for homonyms (a resolve shows both; nothing joins them)."""
        return not (self.numbers_differ or self.homonym)


def label_class(label: str) -> str:
    """The part of a label that is an entity's identity (with its namespace and normalised
    name): a model's type (PERSON, GPE: "Jordan" the person and the country are two entities),
    '' for a shape label, which says how a name is written, not what it names. Migration 0021's
    generated column `entities.label_class` is the same rule in SQL."""
    return "" if label in SHAPE_LABELS else label


def label_conflict(label_a: str, label_b: str) -> bool:
    """Two model labels that say the names denote different kinds of thing (PERSON vs ORG)."""
    return (label_a != label_b and label_a not in SHAPE_LABELS
            and label_b not in SHAPE_LABELS)


def compare(a: str, b: str, *, label_a: str = "NAME", label_b: str = "NAME",
            trigram: float | None = None, floor: float = 0.0) -> Likeness | None:
    """The best rule relating names `a` and `b` (None: nothing relates them). `trigram` is
    pg_trgm's similarity of the normalised names when the database measured it; otherwise
    `trigram_similarity` estimates it. A caller that drops every answer below `floor` (the
    proposal pass) lets the spelling rule, the costly one, be skipped where it cannot reach
    it: an answer at or above `floor` is the same whatever `floor` is."""
    found = _rule(a, b, trigram, floor)
    if found is None:
        return None
    return cap(found, a, b, label_a, label_b)


def cap(found: Likeness, a: str, b: str, label_a: str, label_b: str) -> Likeness:
    """Apply the numbers and homonym caps to what a rule (or another layer) found."""
    confidence = found.confidence
    homonym = label_conflict(label_a, label_b)
    if homonym:
        confidence = min(confidence, HOMONYM_CAP if found.method in STRONG_METHODS
                         else WEAK_CAP)
    differ = _numbers(a) != _numbers(b)
    if differ:
        confidence = min(confidence, NUMBERS_CAP)
    mixed = (label_class(label_a) == "") != (label_class(label_b) == "")
    return Likeness(found.method, round(confidence, 4), differ, homonym, mixed)


def _rule(a: str, b: str, trigram: float | None, floor: float) -> Likeness | None:
    if _normalise(a) == _normalise(b):
        return Likeness("exact", 1.0)
    fa, fb = _fold(a), _fold(b)
    if not fa or not fb:
        return None
    if (fa == fb and _same_symbols(a, b, fa)) or _spelled_out(fa, fb):
        return Likeness("fold", 0.95)
    # two identifiers that differ only in how their pieces are joined ("user_id" / "userId")
    # are the segments rule's; other names may differ in spacing ("Wi-Fi" / "WiFi")
    if not (_is_code(a) and _is_code(b)) and _canon(fa) == _canon(fb) \
            and _same_symbols(a, b, fa):
        return Likeness("fold", 0.95)
    found = [r for r in (_segments(a, b), _initials(fa, fb), _nickname(fa, fb),
                         _prefix(fa, fb)) if r is not None]
    # identifiers name exact things: "get_user" and "get_users" are two functions
    if not (len(_pieces(a)) > 1 and len(_pieces(b)) > 1 and _is_code(a) and _is_code(b)):
        found.extend(r for r in [_spelling(fa, fb, trigram, floor)] if r is not None)
    return max(found, key=lambda r: r.confidence, default=None)


@lru_cache(maxsize=_CACHED)
def _canon(folded: str) -> str:
    """A folded name without its spaces and the leading zeros of its numbers: "Coca Cola" and
    "CocaCola", "Apollo 011" and "Apollo 11" agree."""
    return _LEADING_ZEROS.sub("", folded.replace(" ", "")) if len(folded) >= 4 else folded


@lru_cache(maxsize=_CACHED)
def _is_code(name: str) -> bool:
    """Written as an identifier: no spaces, and pieces joined by case or separators."""
    return " " not in name.strip() and len(_pieces(name)) > 1


def _same_symbols(a: str, b: str, folded: str) -> bool:
    """Folding drops symbols: in a short name they are the name ("C++" / "C#")."""
    if len(folded) >= 4:
        return True
    return _SYMBOLS.sub("", _normalise(a)) == _SYMBOLS.sub("", _normalise(b))


def _spelled_out(fa: str, fb: str) -> bool:
    """"n a s a" and "nasa": one is the other's letters, one by one."""
    return _letters(fa) == fb or _letters(fb) == fa


def _segments(a: str, b: str) -> Likeness | None:
    sa, sb = _pieces(a), _pieces(b)
    if len(sa) < 2 or len(sb) < 2:
        return None
    if sa == sb:
        return Likeness("segments", 0.9)
    short, long_ = (sa, sb) if len(sa) < len(sb) else (sb, sa)
    if long_[-len(short):] == short:
        return Likeness("segments", 0.8)
    return None


def initials(folded: str, *, keep_stop: bool) -> str:
    """The first letters of a folded name's words (stop words skipped unless `keep_stop`)."""
    return "".join(w[0] for w in folded.split() if keep_stop or w not in _STOP)


def _initials(fa: str, fb: str) -> Likeness | None:
    for short, long_ in ((fa, fb), (fb, fa)):
        if " " in short or not 2 <= len(short) <= 10 or len(_words(long_)) < 2:
            continue
        if short in _both_initials(long_):
            return Likeness("initials", 0.9)
    return None


def _nickname(fa: str, fb: str) -> Likeness | None:
    wa, wb = _words(fa), _words(fb)
    if len(wa) < 2 or len(wa) != len(wb) or wa[1:] != wb[1:]:
        return None
    if wb[0] in _NICKNAMES.get(wa[0], ()) or wa[0] in _NICKNAMES.get(wb[0], ()):
        return Likeness("nickname", 0.85)
    return None


def _prefix(fa: str, fb: str) -> Likeness | None:
    wa, wb = _words(fa), _words(fb)
    short, long_ = (wa, wb) if len(wa) < len(wb) else (wb, wa)
    if not short or len(short) == len(long_):
        return None
    if long_[:len(short)] == short:
        rest = long_[len(short):]
        if all(len(w) == 1 for w in rest):  # "S.A." folds to "s a"
            rest = ("".join(rest),)
        return Likeness("prefix", 0.93 if all(w in _COMPANY for w in rest) else 0.6)
    if long_[-len(short):] == short and len("".join(short)) >= 4:
        return Likeness("prefix", 0.6)
    return None


def _spelling(fa: str, fb: str, trigram: float | None, floor: float) -> Likeness | None:
    # short names differ in few letters by chance ("Rome" / "Rose"): a lead at most
    ceiling = SPELLING_CAP if min(len(fa), len(fb)) >= 5 else 0.6
    reach = floor - _ROUNDING  # what rounds up to `floor` is kept
    if ceiling < reach:
        return None
    ratio = trigram if trigram is not None else trigram_similarity(fa, fb)
    # the edit similarity is at most 1 - (length difference / longer length): computed only
    # when that bound could raise the ratio to something kept
    bound = 1.0 - abs(len(fa) - len(fb)) / max(len(fa), len(fb))
    if bound > ratio and bound >= 0.5 and SPELLING_CAP * bound >= reach:
        ratio = max(ratio, edit_similarity(fa, fb, reach / SPELLING_CAP))
    if ratio < 0.5 or SPELLING_CAP * ratio < reach:
        return None
    return Likeness("spelling", min(ceiling, SPELLING_CAP * ratio))


def edit_similarity(a: str, b: str, at_least: float = 0.0) -> float:
    """1 - (optimal string alignment distance / longer length): adjacent swaps cost one. A
    similarity below `at_least` is answered 0.0 (the proposal pass needs no more): only the
    cells within the distance that `at_least` allows are computed (a band about the diagonal),
    and the scan stops once no cell is within it."""
    if not a or not b:
        return 0.0
    longest = max(len(a), len(b))
    # the largest distance that keeps the similarity at `at_least`; farther cells count as k + 1
    k = int((1.0 - max(at_least, 0.0)) * longest + 1e-9)
    if abs(len(a) - len(b)) > k:
        return 0.0
    far = k + 1
    prev2: list[int] = []
    prev = [j if j <= k else far for j in range(len(b) + 1)]
    for i in range(1, len(a) + 1):
        cur = [far] * (len(b) + 1)
        cur[0] = i if i <= k else far
        for j in range(max(1, i - k), min(len(b), i + k) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            d = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d = min(d, prev2[j - 2] + 1)
            cur[j] = d if d <= k else far
        # every later cell comes from this row or the one before (plus one): none can get back
        if min(cur) > k and min(prev) >= k:
            return 0.0
        prev2, prev = prev, cur
    distance = prev[len(b)]
    return 0.0 if distance > k else 1.0 - distance / longest


@lru_cache(maxsize=_CACHED)
def _trigrams(text: str) -> frozenset[str]:
    out: set[str] = set()
    for word in text.split():
        padded = f"  {word} "
        out.update(padded[i:i + 3] for i in range(len(padded) - 2))
    return frozenset(out)


def trigram_similarity(a: str, b: str) -> float:
    """pg_trgm's `similarity` of two folded names (shared trigrams over all trigrams)."""
    ta, tb = _trigrams(a), _trigrams(b)
    if not ta or not tb:
        return 0.0
    return len(ta & tb) / len(ta | tb)
