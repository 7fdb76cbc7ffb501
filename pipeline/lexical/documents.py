"""The Tantivy index's shape: where it lives, its schema, and one searchable row as a document.

One index per namespace per index generation, under the data directory
(`<data_dir>/lexical/gen-<n>/<namespace>/`): BM25's statistics (document count, mean length,
document frequency) are then the namespace's own, as the SQL BM25's are, and no tenant's words
weigh in another's ranking. Replay builds the new generation's indexes beside the old ones.

The analysed text is Postgres's: a row's document holds the lexemes of its `lexical` tsvector
(English Snowball stemming, stop words dropped, hyphenated identifiers kept whole and split into
their parts, exactly as the SQL BM25 counts them), pre-tokenized at their tsvector positions, so
a document's length and term frequencies are its postings' `doc_len` and `tf`. Queries are
analysed by the same Postgres function (`PartSearcher.query_lexemes`).

Filters judge the promoted object (a part by its parent), as in
`pipeline/retrieval/store/filters.py`: its kind, lowercased title (ILIKE by a regex over one
term), creation and update times in microseconds (Tantivy's date fields keep seconds), and
properties as JSON (fast: range filters and aggregations read them by column).

An index keeps the schema it was created with (in its meta.json). One written with an older
schema is stale (`is_stale`): searches still read it, and the writer rebuilds it from Postgres
into a fresh directory the first time it writes to that namespace (`LexicalWriter`), as
`brainstream migrate` does for every stale index of a generation.
"""

from __future__ import annotations

import functools
import json
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import tantivy

from pipeline.domain.conditions import instant

# field names
ROW_ID = "row_id"  # the searchable row (part, or object without parts): scope and deletes
ROOT_ID = "root_id"  # its promoted object: re-sync deletes by it, scope matches it
ID_HI = "id_hi"  # the row id's two halves as fast fields: a hit's id without loading its doc
ID_LO = "id_lo"
KIND = "kind"
TITLE = "title_lc"
CREATED = "created_us"
UPDATED = "updated_us"
PROPERTIES = "props"
TEXT = "lex"  # the tsvector's lexemes, pre-tokenized
BODY = "body"  # the row's own text, stored and stemmed by Tantivy: what snippets are cut from
# One document per object leads it (`LEAD` 1; the others 0) and holds every lexeme of the
# object's rows (`ROOT_TEXT`, no positions): facets count objects on the leads alone, exactly
# (`pipeline/lexical/facets.py`), where counting rows would count an object once per part.
LEAD = "lead"
ROOT_TEXT = "root_lex"
ROOT_HI = "root_hi"  # the object's id in two halves, fast: a sorted lead's object, at once
ROOT_LO = "root_lo"

LOWER_RAW = "lower_raw"  # a whole value as one lowercased term (the title filter)
_MASK64 = (1 << 64) - 1


def build_schema() -> tantivy.Schema:
    """The schema of every lexical index (ids and filter fields fast, the text with positions)."""
    sb = tantivy.SchemaBuilder()
    sb.add_text_field(ROW_ID, tokenizer_name="raw", index_option="basic")
    sb.add_text_field(ROOT_ID, tokenizer_name="raw", fast=True, index_option="basic")
    sb.add_unsigned_field(ID_HI, fast=True)
    sb.add_unsigned_field(ID_LO, fast=True)
    sb.add_text_field(KIND, tokenizer_name="raw", fast=True, index_option="basic")
    sb.add_text_field(TITLE, tokenizer_name=LOWER_RAW, index_option="basic")
    sb.add_integer_field(CREATED, indexed=True, fast=True)
    sb.add_integer_field(UPDATED, indexed=True, fast=True)
    sb.add_json_field(PROPERTIES, tokenizer_name="raw", index_option="basic", fast=True)
    sb.add_text_field(TEXT, tokenizer_name="raw", index_option="position")
    sb.add_text_field(BODY, stored=True, tokenizer_name="en_stem", index_option="freq")
    sb.add_unsigned_field(LEAD, indexed=True, fast=True)
    sb.add_text_field(ROOT_TEXT, tokenizer_name="raw", index_option="basic")
    sb.add_unsigned_field(ROOT_HI, fast=True)
    sb.add_unsigned_field(ROOT_LO, fast=True)
    return sb.build()


SCHEMA = build_schema()


def register_tokenizers(index: tantivy.Index) -> None:
    """The analyzers the schema names beyond Tantivy's own (each opener registers them)."""
    index.register_tokenizer(LOWER_RAW, tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.raw())
                             .filter(tantivy.Filter.lowercase()).build())


def generation_dir(data_dir: Path, generation: int) -> Path:
    """The directory of one index generation's lexical indexes."""
    return data_dir / "lexical" / f"gen-{generation}"


def namespace_dir(data_dir: Path, generation: int, namespace: uuid.UUID) -> Path:
    """One namespace's index directory."""
    return generation_dir(data_dir, generation) / str(namespace)


def indexed_namespaces(data_dir: Path, generation: int) -> set[uuid.UUID]:
    """The namespaces with an index directory in this generation (whatever Postgres holds)."""
    return namespace_dirs(generation_dir(data_dir, generation))


def namespace_dirs(directory: Path) -> set[uuid.UUID]:
    """The namespaces whose index directories `directory` holds (other entries: a rebuild's
    directory, the replica's state, a seed's file)."""
    out: set[uuid.UUID] = set()
    if directory.is_dir():
        for child in directory.iterdir():
            try:
                out.add(uuid.UUID(child.name))
            except ValueError:
                continue
    return out


def open_index(path: Path, *, create: bool) -> tantivy.Index | None:
    """The index at `path` with our tokenizers; created when `create`, else None if absent."""
    if not index_exists(path):
        if not create:
            return None
        path.mkdir(parents=True, exist_ok=True)
        index = tantivy.Index(SCHEMA, path=str(path), reuse=True)
    else:
        index = tantivy.Index.open(str(path))
    register_tokenizers(index)
    return index


@functools.cache
def _current_schema() -> list[Any]:
    """The schema as Tantivy writes it into meta.json (from an empty index made once)."""
    with tempfile.TemporaryDirectory() as tmp:
        tantivy.Index(SCHEMA, path=tmp)
        return list(json.loads((Path(tmp) / "meta.json").read_text())["schema"])


def is_stale(path: Path) -> bool:
    """Whether the index at `path` was written with another schema than `SCHEMA` (False when
    there is no index)."""
    try:
        meta = json.loads((path / "meta.json").read_text())
    except FileNotFoundError:
        return False
    return bool(meta.get("schema") != _current_schema())


def index_exists(path: Path) -> bool:
    """Whether `path` holds an index (its meta.json)."""
    return (path / "meta.json").is_file()


def id_halves(value: uuid.UUID) -> tuple[int, int]:
    """A UUID as two unsigned 64-bit integers."""
    return value.int >> 64, value.int & _MASK64


def id_from_halves(hi: int, lo: int) -> uuid.UUID:
    """The UUID `id_halves` split."""
    return uuid.UUID(int=(hi << 64) | lo)


def micros(value: datetime) -> int:
    """Microseconds since the epoch (exact: Postgres keeps microseconds)."""
    delta = value - datetime(1970, 1, 1, tzinfo=value.tzinfo)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


@dataclass(frozen=True)
class RowDocument:
    """A searchable row as the index holds it (`positions`: lexeme -> tsvector positions, empty
    for a lexeme stored without positions, which counts once)."""

    row_id: uuid.UUID
    root_id: uuid.UUID
    kind: str
    title: str | None
    created_at: datetime
    updated_at: datetime
    properties: Mapping[str, Any]
    positions: Mapping[str, Sequence[int]]
    body: str


def tokens(positions: Mapping[str, Sequence[int]]) -> list[tantivy.Token]:
    """The lexemes at their positions (one token per position: tf and length as in postings)."""
    out: list[tuple[int, str]] = []
    for lexeme, where in positions.items():
        out.extend((p, lexeme) for p in (where or (0,)))
    out.sort()
    return [tantivy.Token(lexeme, pos, 0, 0) for pos, lexeme in out]


def json_properties(properties: Mapping[str, Any]) -> dict[str, Any]:
    """The properties as the index holds them: an instant-shaped string (ISO-8601 date or
    date-time, `pipeline/domain/conditions.py`) as RFC 3339 UTC, which Tantivy indexes as a
    date, so a date-only value and one with an offset compare as the instants they are."""
    return {k: _json_value(v) for k, v in properties.items()}


def _json_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    moment = instant(value)
    if moment is None:
        return value
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def to_documents(rows: Sequence[RowDocument]) -> list[tantivy.Document]:
    """The documents of whole objects' rows (every row of each root among `rows`): the first
    row of each root leads it, holding the lexemes of all of them."""
    lexemes: dict[uuid.UUID, set[str]] = {}
    for row in rows:
        lexemes.setdefault(row.root_id, set()).update(row.positions)
    out = []
    for row in rows:
        lead = lexemes.pop(row.root_id, None)
        out.append(to_document(row, lead))
    return out


def to_document(row: RowDocument, lead: set[str] | None = None) -> tantivy.Document:
    """The Tantivy document of one searchable row; `lead`: it leads its object, whose
    lexemes these are."""
    doc = tantivy.Document()
    doc.add_text(ROW_ID, str(row.row_id))
    doc.add_text(ROOT_ID, str(row.root_id))
    hi, lo = id_halves(row.row_id)
    doc.add_unsigned(ID_HI, hi)
    doc.add_unsigned(ID_LO, lo)
    doc.add_text(KIND, row.kind)
    if row.title is not None:
        doc.add_text(TITLE, row.title)
    doc.add_integer(CREATED, micros(row.created_at))
    doc.add_integer(UPDATED, micros(row.updated_at))
    if row.properties:
        doc.add_json(PROPERTIES, json_properties(row.properties))
    doc.add_pre_tokenized_text(TEXT, tantivy.PreTokenizedString("", tokens(row.positions)))
    doc.add_text(BODY, row.body)
    doc.add_unsigned(LEAD, 0 if lead is None else 1)
    root_hi, root_lo = id_halves(row.root_id)
    doc.add_unsigned(ROOT_HI, root_hi)
    doc.add_unsigned(ROOT_LO, root_lo)
    if lead:
        doc.add_pre_tokenized_text(ROOT_TEXT, tantivy.PreTokenizedString(
            "", [tantivy.Token(lexeme, i, 0, 0) for i, lexeme in enumerate(sorted(lead))]))
    return doc
