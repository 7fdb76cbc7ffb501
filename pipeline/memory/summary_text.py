"""The pure rules of conversation summaries: when to fold, what counts as empty chatter, how a
text splits into sentences, and which sentences an extractive summary keeps.

Tokens are the chunker's approximation (`pipeline/domain/chunking.py: count_tokens`, one token per
`\\w+` run or punctuation mark): deterministic and model-free, so a message's `token_count` and a
summary's budget agree with the parts the pipeline cuts. No tokenizer library (tiktoken) is
installed here.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pipeline.domain.chunking import count_tokens

# Words that carry no content in a chat: acknowledgements, greetings, fillers, and the English
# function words (a message made only of these is chatter, and so is a sentence).
_CHATTER_WORDS = """
ok okay k kk yes yeah yep yup no nope nah sure fine cool great nice good thanks thank thx ty
please pls hi hey hello bye goodbye cya lol lmao haha hahaha hehe hmm hm uh um oh ah wow yay
right alright gotcha np welcome cheers ha omg wait well so oops sorry
"""
_STOPWORD_WORDS = """
a an the and or but if then so of to in on at by for with from as is are was were be been being
am do does did done have has had i me my we our you your he him his she her it its they them
their this that these those there here what which who whom when where why how not no too very
can could would should will shall may might must just also up out about into over again all any
some more most such only own same than s t don isn aren wasn weren won didn doesn haven hasn
im ive youre thats its lets let get got
"""
_CHATTER = frozenset(_CHATTER_WORDS.split())
_STOPWORDS = frozenset(_STOPWORD_WORDS.split())
_WORD_RE = re.compile(r"[^\W\d_]{2,}|\d+")
# A sentence ends after a terminator (and its closing quotes/brackets) followed by space, or at a
# newline.
_SENTENCE_END_RE = re.compile(r"[.!?\u2026\u3002\uff01\uff1f][\"')\]\u201d\u2019]*(?=\s)|\n")
# The speaker label a line starts with ("user: ", "Caroline: "): not content of the sentence.
_LABEL_RE = re.compile(r"^[^\W\d][\w .'-]{0,39}:\s")


def content_words(text: str) -> list[str]:
    """The lower-cased words of `text` that carry content (not chatter, not function words)."""
    return [w for w in (m.group(0).lower() for m in _WORD_RE.finditer(text))
            if w not in _CHATTER and w not in _STOPWORDS]


def is_chatter(text: str) -> bool:
    """Whether `text` says nothing worth a summary: no content word ("ok", "thanks!", emoji);
    a leading speaker label ("user: ok") does not count."""
    return not content_words(_LABEL_RE.sub("", text, count=1))


def sentences(text: str) -> list[str]:
    """The sentences of `text`, stripped, empty ones dropped (a newline also ends one)."""
    out: list[str] = []
    start = 0
    for match in _SENTENCE_END_RE.finditer(text):
        out.append(text[start:match.end()].strip())
        start = match.end()
    out.append(text[start:].strip())
    return [s for s in out if s]


def fold_steps(pending: int, window: int, max_step: int) -> list[int]:
    """How many of the oldest `pending` messages (after the summary point) each fold takes.

    Nothing while `pending <= window`; else folds of `pending - window // 2` messages, split into
    steps of at most `max_step` (a large batch is folded in several summaries, none skipped),
    until `window // 2` remain.
    """
    if window < 1 or max_step < 1:
        raise ValueError("window and max_step must be at least 1")
    if pending <= window:
        return []
    total = pending - window // 2
    steps = [max_step] * (total // max_step)
    if total % max_step:
        steps.append(total % max_step)
    return steps


@dataclass(frozen=True)
class Candidate:
    """One sentence a summary may keep; `order` is its place in the conversation."""

    text: str
    order: int
    tokens: int


def candidates(previous: str | None, lines: Sequence[str]) -> list[Candidate]:
    """The previous summary's sentences, then the lines' sentences, chatter dropped, exact
    repeats once (the earliest)."""
    out: list[Candidate] = []
    seen: set[str] = set()
    for text in [*sentences(previous or ""), *(s for line in lines for s in sentences(line))]:
        key = " ".join(content_words(_LABEL_RE.sub("", text, count=1)))
        if not key or key in seen:
            continue
        seen.add(key)
        out.append(Candidate(text, len(out), count_tokens(text)))
    return out


def term_weights(items: Sequence[Candidate]) -> list[float]:
    """Each sentence's term weight: the mean over its content words of tf (in the whole text
    being summarised) x idf (over its sentences), so sentences about the conversation's
    recurring but specific subjects rank high. In [0, 1] after scaling by the maximum."""
    words = [content_words(c.text) for c in items]
    tf = Counter(w for ws in words for w in ws)
    df = Counter(w for ws in words for w in set(ws))
    n = len(items)
    raw = [sum(math.log1p(tf[w]) * math.log(1 + n / df[w]) for w in ws) / math.sqrt(len(ws))
           if ws else 0.0 for ws in words]
    top = max(raw, default=0.0)
    return [r / top if top > 0 else 0.0 for r in raw]


def centrality(vectors: NDArray[np.float32]) -> list[float]:
    """Each row's cosine to the centroid of all rows (rows are unit-normalised or zero), scaled
    to [0, 1]: how much of the whole a sentence stands for."""
    if len(vectors) == 0:
        return []
    centroid = vectors.mean(axis=0)
    norm = float(np.linalg.norm(centroid))
    if norm == 0.0:
        return [0.0] * len(vectors)
    sims = (vectors @ (centroid / norm)).astype(float)
    low, high = float(sims.min()), float(sims.max())
    if high - low < 1e-9:
        return [1.0] * len(vectors)
    return [(s - low) / (high - low) for s in sims]


def select(items: Sequence[Candidate], scores: Sequence[float], vectors: NDArray[np.float32],
           budget: int, *, redundancy: float = 0.9) -> list[Candidate]:
    """The best-scoring sentences that fit `budget` tokens, a near-repeat (cosine above
    `redundancy` to a kept one) skipped, returned in conversation order."""
    kept: list[int] = []
    used = 0
    for i in sorted(range(len(items)), key=lambda j: (-scores[j], items[j].order)):
        if used + items[i].tokens > budget:
            continue
        if any(float(vectors[i] @ vectors[j]) > redundancy for j in kept):
            continue
        kept.append(i)
        used += items[i].tokens
    return [items[i] for i in sorted(kept, key=lambda j: items[j].order)]
