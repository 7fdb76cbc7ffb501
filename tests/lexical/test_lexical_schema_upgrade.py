"""An index written with an older schema (the properties field not fast) on the real database:
searches still read it, `brainstream migrate` rebuilds it with the current schema, and so does
the writer the first time it writes to that namespace."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
import tantivy

from pipeline.domain.read_model import Filters
from pipeline.lexical import changes
from pipeline.lexical.documents import (
    BODY,
    CREATED,
    ID_HI,
    ID_LO,
    KIND,
    PROPERTIES,
    ROOT_ID,
    ROW_ID,
    TEXT,
    TITLE,
    UPDATED,
    id_halves,
    is_stale,
    namespace_dir,
    register_tokenizers,
    tokens,
)
from pipeline.lexical.searcher import TantivySearcher
from pipeline.lexical.writer import LexicalWriter
from pipeline.ops.generations import migrate_generations
from pipeline.retrieval.store.search import PgPartSearcher
from pipeline.settings import Settings
from tests.pipelineutil import put
from tests.search.searchref import apply_events

pytestmark = pytest.mark.stack


def _old_schema() -> tantivy.Schema:
    """The schema before the properties field was fast (frozen here on purpose)."""
    sb = tantivy.SchemaBuilder()
    sb.add_text_field(ROW_ID, tokenizer_name="raw", index_option="basic")
    sb.add_text_field(ROOT_ID, tokenizer_name="raw", fast=True, index_option="basic")
    sb.add_unsigned_field(ID_HI, fast=True)
    sb.add_unsigned_field(ID_LO, fast=True)
    sb.add_text_field(KIND, tokenizer_name="raw", fast=True, index_option="basic")
    sb.add_text_field(TITLE, tokenizer_name="lower_raw", index_option="basic")
    sb.add_integer_field(CREATED, indexed=True, fast=True)
    sb.add_integer_field(UPDATED, indexed=True, fast=True)
    sb.add_json_field(PROPERTIES, tokenizer_name="raw", index_option="basic")
    sb.add_text_field(TEXT, tokenizer_name="raw", index_option="position")
    sb.add_text_field(BODY, stored=True, tokenizer_name="en_stem", index_option="freq")
    return sb.build()


def _write_old_index(path: Path, db: psycopg.Connection[Any], ns: uuid.UUID) -> None:
    """Replace the namespace's index by one of the old schema holding its rows."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    index = tantivy.Index(_old_schema(), path=str(path))
    register_tokenizers(index)
    writer = index.writer(15_000_000, 1)
    for row in changes.load_documents(db, ns, changes.roots_of(db, ns)):
        doc = tantivy.Document()  # the fields of that schema only
        doc.add_text(ROW_ID, str(row.row_id))
        doc.add_text(ROOT_ID, str(row.root_id))
        hi, lo = id_halves(row.row_id)
        doc.add_unsigned(ID_HI, hi)
        doc.add_unsigned(ID_LO, lo)
        doc.add_text(KIND, row.kind)
        doc.add_pre_tokenized_text(TEXT, tantivy.PreTokenizedString("", tokens(row.positions)))
        doc.add_text(BODY, row.body)
        writer.add_document(doc)
    writer.commit()
    writer.wait_merging_threads()


def _fill(db: psycopg.Connection[Any], n: int, word: str) -> uuid.UUID:
    ns = uuid.uuid4()
    apply_events(db, [put(ns, kind="note", title=f"{word} note {i}",
                          properties={"rank": i}, content=f"{word} entry {i}")
                      for i in range(n)])
    return ns


def test_an_old_schema_index_is_searched_then_rebuilt_by_migrate_and_by_the_writer(
        lex_settings: Settings, db: psycopg.Connection[Any], writer: LexicalWriter,
        pg_searcher: PgPartSearcher) -> None:
    ns, other = _fill(db, 4, "wombat"), _fill(db, 2, "wombat")
    writer.run()
    path = namespace_dir(lex_settings.resolved_data_dir, lex_settings.generation, ns)
    assert not is_stale(path)
    _write_old_index(path, db, ns)
    assert is_stale(path)
    searcher = TantivySearcher(lex_settings.resolved_data_dir, lex_settings.generation,
                               pg_searcher.query_lexemes)

    def found(word: str, namespace: uuid.UUID = ns) -> int:
        return len(asyncio.run(searcher.search_lexical(namespace, word, Filters(), [], 50)))

    assert found("wombat") == 4  # the old index still answers
    # `brainstream migrate` rebuilds the stale index, and only it
    migrate_generations(lex_settings, graph=False)
    assert not is_stale(path)
    assert found("wombat") == 4 and found("wombat", other) == 2  # reopened, not reloaded
    # stale again: the writer's next write to the namespace rebuilds it first
    _write_old_index(path, db, ns)
    assert found("wombat") == 4
    apply_events(db, [put(ns, kind="note", title="numbat", content="numbat entry")])
    stats = writer.run()
    assert stats.rows and not is_stale(path)
    assert found("numbat") == 1 and found("wombat") == 4
    assert not list(path.parent.glob("*.rebuild")) and not list(path.parent.glob("*.old"))
