"""What the model reads: the server's instructions (which tool when, what the answers' labels
mean) and the filter text of the search tools, built from the live `/v1/schema` when the server
starts (kinds, their filterable fields, the namespace's entity labels and edge types)."""

from __future__ import annotations

from typing import Any

INSTRUCTIONS_TEMPLATE = """\
brainstream is a knowledge base of objects (each of a kind: company, deal, note, ... with a
title, summary, properties and content; long content is cut into parts), links between objects
(a relation type, from -> to, with metadata), entities extracted from the text (people,
organisations, places, ...), and conversation memory (sessions of messages with a running
summary). Everything you see is in one namespace: the one of the API key you act with.

Which tool:
- search: the default for a question in words (hybrid: lexical + near-spellings + meaning).
  mode=ppr for multi-hop questions that name several entities; mode=auto lets the server pick.
  explain=true says how the answer was ranked.
- find_exact: the exact words or an identifier (order number, error code, a quoted phrase).
- find_objects: objects (and with include_entities the entities) named like the query, by kind.
- find_links: links of one relation type whose note or metadata matches the query.
- read: one object by id with its properties, entities and links; children: its parts (text).
- expand / expand_many: the neighbourhood of objects in the graph (links, parts, containment);
  list_recipes / run_recipe: named expansions the namespace or operator defined.
- resolve: which entity a name means (candidates with confidence); paths: how two objects or
  entities are connected (the best k paths with their evidence).
- memory_get: a session's summary and recent messages; memory_search: search a session's (or a
  user's) messages and summaries.
- schema: the kinds, their fields and filters, the entity labels and edge types.
- entity: one entity with its labels, counts, neighbours and mentions; search_entities: entities
  by name; possibly_same: pairs of entities that may be one, with evidence.
- continue: the next page of any ranked answer that said has_more (pass its result_set_id).
{writes}

Labels on answers:
- degrade "lexical_only": the embedding model is unavailable; only word matches ranked the
  answer, so paraphrases and synonyms may be missed. Retry later or rephrase with exact words.
- degrade "graph_unavailable": the graph database is unavailable; expand answers containment
  (parts) only and find_objects falls back to text search; find_links fails until it returns.
- degraded "lexical_only" on memory_search: the same, for conversation memory.
- mode: which search ran ("hybrid" or "ppr"; with mode=auto, the one auto chose).
- truncated: a bound cut the answer; more matches may exist: narrow the request.
- has_more + result_set_id: more results; call continue.

Errors: a failed call returns the API's JSON error: {"status", "error": {"code", "message",
"field"}}; `field` names the argument at fault (e.g. "filters.stage", "events.0.data.kind").
Status 401/403: the key is unknown or not allowed there; 404: not found in this namespace;
422: fix the named field; 429/503: retry a little later.
"""

WRITES = """\
- save_object, delete_object, save_link, add_messages: write. Writes are events the pipeline
  applies in the background: pass wait=true to answer only once applied (status "applied"),
  else the status is "accepted" and a search may not find the write for a few seconds.
- decide_pair: a curator's verify, refuse or defer of a possibly_same pair (admin keys only)."""

READ_ONLY = """\
- This server is read-only: it has no tools that save, delete or add messages."""


def instructions(read_only: bool) -> str:
    """The server's instructions: the write tools named only where they are registered."""
    return INSTRUCTIONS_TEMPLATE.replace("{writes}", READ_ONLY if read_only else WRITES)


FILTERS_BASE = (
    "filters: an object {kind?, title?, created_after?, created_before?, updated_after?, "
    "updated_before?, <field>: value | [values]}. kind is a kind or a list of kinds; title a "
    "case-insensitive substring; dates ISO-8601; a field filter matches a property exactly "
    "(a list: any of the values, where the field allows `in`). A part is filtered by its parent."
)


def _kind_line(kind: dict[str, Any]) -> str:
    fields = [f for f in kind.get("fields", []) if f.get("filterable")]
    described = []
    for f in fields:
        text = f"{f['name']} ({f.get('type')}; {'/'.join(f.get('operators', []))}"
        if f.get("examples"):
            text += "; e.g. " + ", ".join(str(e) for e in f["examples"][:5])
        described.append(text + ")")
    head = f"- {kind['kind']}"
    if kind.get("description"):
        head += f": {kind['description']}"
    return head + (" Filterable: " + ", ".join(described) + "." if described else "")


def filters_text(schema: dict[str, Any] | None) -> str:
    """The filter grammar, and the kinds with their filterable fields when the schema is known."""
    if schema is None:
        return FILTERS_BASE + " Call the schema tool for the kinds and their filterable fields."
    if schema.get("open_mode"):
        return FILTERS_BASE + " The catalog is open: any kind, any property may be filtered."
    lines = [_kind_line(k) for k in schema.get("kinds", [])]
    return FILTERS_BASE + " Kinds:\n" + "\n".join(lines)


def relations_text(schema: dict[str, Any] | None) -> str:
    """The namespace's entity labels and edge types, when the schema at start had them."""
    entities = (schema or {}).get("entities") or {}
    labels = ", ".join(f"{x['label']} ({x['count']})" for x in entities.get("labels", [])[:30])
    edges = ", ".join(f"{x['type']} ({x['count']})" for x in entities.get("edge_types", [])[:30])
    parts = []
    if labels:
        parts.append(f"Entity labels here: {labels}.")
    if edges:
        parts.append(f"Entity edge types: {edges}.")
    parts.append("Link relation types are the publishers' own names (letters, digits, "
                 "underscore), e.g. those seen in read or expand answers.")
    return " ".join(parts)
