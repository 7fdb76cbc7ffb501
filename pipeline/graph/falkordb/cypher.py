"""The Cypher the FalkorDB writer and reader send, and the builders of what depends on arguments.

Query text only: `writer.py` and `reader.py` decide when to send what and read the rows. The
schema's own statements (indexes, constraints) are in `schema.py`.

FalkorDB 4.16.3 quirks absorbed here:
- Any SET (even of an unchanged value, even of a non-vector property) or DELETE on a
  vector-indexed node leaves an orphan entry in the vector index, so `queryNodes(k)` returns fewer
  than k. Hence `UPSERT_NODES` does not touch a node whose stored state already equals the new
  one, and rewrites the embedding only when its `embedded_hash` (or its presence) changes.
- SET of a vector over an existing vector is silently skipped when both are equal after rounding
  every component to the nearest integer, i.e. always for normalized embeddings (components in
  (-0.5, 0.5)): the old vector stays. Removing the property first makes the SET take effect.
- Relation types cannot be query parameters, in a MERGE or in a pattern: one statement per type,
  back-quoted (`[e:`A`|`B`]`). The callers check names against `RELATION_TYPE_PATTERN` first.
- Full-text queries use RediSearch syntax (`|`, `-`, `@`, `(`, `"`, `%`, `*`, `~`, `:` ... are
  operators, and a stray one is a syntax error; so is a bare `_`): `fulltext_query` reduces user
  text to its word tokens, OR-ed (fuzzed with 20k random Unicode strings: no syntax error left;
  the reader logs one and finds nothing).
  `queryNodes` yields every match (no k) in no particular order: ORDER BY score in Cypher.
  Scores are TF-IDF with the term frequency divided by the document's most frequent term, so
  ties are common (and every score is 0 when every indexed node matches): ties go by id.
- Case folding in the full-text index is ASCII-only ("NAÏVE" does not find "naïve"): a token
  with non-ASCII letters is also searched in lower, upper and capitalized form.
- Every statement on objects and links names the `Entity` label at both ends, so nodes of any
  other label (the `NamedEntity` nodes an older version projected, until `prepare_graph` deletes
  them) are never reached.
- Walks: written as one pattern, `MATCH (a {id: f})-[e]-(b:Entity) WHERE b.namespace = ...` is
  planned from `b` (a scan of the whole namespace, 40 ms on 10k nodes instead of 0.3 ms);
  indexing a list parameter per row (`$frontier[pos]`) and sorting every candidate edge are
  slow too. `walk_query` explains the shape that avoids all three.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pipeline.domain.read_model import Direction
from pipeline.graph.falkordb.schema import NODE_LABEL

# -- writer ---------------------------------------------------------------------------------

_NODE_SCALARS = ("namespace", "kind", "title", "index_text", "embedded_hash", "updated_at")
_EDGE_FIELDS = ("namespace", "note", "status", "role", "confidence", "evidence_id",
                "created_at", "updated_at")


def _same(prop: str) -> str:
    # Null-safe equality: `a = b` is null when either side is null.
    return f"coalesce(n.{prop} = r.{prop}, n.{prop} IS NULL AND r.{prop} IS NULL)"


# One statement per batch: FalkorDB runs a query atomically, so the comparison with the stored
# state and the write cannot interleave with another writer. REMOVE before SET: see the module
# docstring (a new vector close to the old one is otherwise not written). Returns the nodes
# written and, of those, the embeddings rewritten.
UPSERT_NODES = f"""
UNWIND $rows AS r
MERGE (n:{NODE_LABEL} {{id: r.id}})
WITH n, r,
  CASE
    WHEN r.embedding IS NULL THEN n.embedding IS NOT NULL
    WHEN n.embedding IS NULL OR r.embedded_hash IS NULL THEN true
    ELSE coalesce(n.embedded_hash <> r.embedded_hash, true)
  END AS vec_changed
WITH n, r, vec_changed
WHERE vec_changed OR NOT ({" AND ".join(_same(p) for p in _NODE_SCALARS)})
SET {", ".join(f"n.{p} = r.{p}" for p in _NODE_SCALARS)}
FOREACH (_ IN CASE WHEN vec_changed THEN [1] ELSE [] END |
  REMOVE n.embedding
  SET n.embedding = CASE WHEN r.embedding IS NULL THEN NULL ELSE vecf32(r.embedding) END)
RETURN count(n), sum(CASE WHEN vec_changed THEN 1 ELSE 0 END)
"""

DELETE_NODES = f"UNWIND $ids AS id MATCH (n:{NODE_LABEL} {{id: id}}) DETACH DELETE n"


def upsert_edges(relation_type: str) -> str:
    """MERGE the `$rows` edges of one (already checked) relation type, and their endpoints."""
    # Endpoints are merged so that edge and node projections may arrive in any order; a
    # placeholder gets the edge's namespace and is filled in by the node's own upsert.
    return f"""
UNWIND $rows AS r
MERGE (a:{NODE_LABEL} {{id: r.from_id}}) ON CREATE SET a.namespace = r.namespace
MERGE (b:{NODE_LABEL} {{id: r.to_id}}) ON CREATE SET b.namespace = r.namespace
MERGE (a)-[e:`{relation_type}`]->(b)
SET {", ".join(f"e.{f} = r.{f}" for f in _EDGE_FIELDS)}
"""


def delete_edges(relation_type: str) -> str:
    """DELETE the `$rows` edges (from_id, to_id) of one (already checked) relation type."""
    return f"""
UNWIND $rows AS r
MATCH (:{NODE_LABEL} {{id: r.from_id}})-[e:`{relation_type}`]->(:{NODE_LABEL} {{id: r.to_id}})
DELETE e
"""


PROCEDURES = "CALL dbms.procedures() YIELD name RETURN name"

# The writer's own reads (tests, `brainstream verify`).
NODE_EXISTS = f"MATCH (n:{NODE_LABEL} {{id: $id}}) RETURN count(n)"
# A placeholder (created by an edge to a node not synced yet) has no kind.
NODE_TIMES = (f"UNWIND $ids AS id MATCH (n:{NODE_LABEL} {{id: id}}) WHERE n.kind IS NOT NULL "
              "RETURN n.id, n.updated_at")
FETCH_NODE = (f"MATCH (n:{NODE_LABEL} {{id: $id}}) RETURN n.id, n.namespace, n.kind, n.title, "
              "n.index_text, n.embedding, n.embedded_hash, n.updated_at")
FETCH_EDGES = (f"MATCH (a:{NODE_LABEL})-[e]->(b:{NODE_LABEL}) "
               "WHERE $ns IS NULL OR e.namespace = $ns "
               "RETURN a.id, b.id, type(e), e.namespace, e.note, e.status, e.role, e.confidence, "
               "e.evidence_id, e.created_at, e.updated_at ORDER BY a.id, type(e), b.id")
NODE_IDS = f"MATCH (n:{NODE_LABEL}) WHERE $ns IS NULL OR n.namespace = $ns RETURN n.id"

# -- reader ---------------------------------------------------------------------------------

# Bounds on what one user query may ask of the full-text index.
MAX_QUERY_TOKENS = 32
MAX_TOKEN_CHARS = 64
_WORD = re.compile(r"\w+")

# A node that is only an edge endpoint (its own projection has not arrived) has kind "" or none;
# `null <> ''` is null, so a missing kind is excluded too.
_VISIBLE = "{v}.namespace = $ns AND {v}.kind <> ''"
_KINDS = "(size($kinds) = 0 OR {v}.kind IN $kinds)"

TEXT_QUERY = f"""
CALL db.idx.fulltext.queryNodes('{NODE_LABEL}', $q) YIELD node, score
WHERE {_VISIBLE.format(v="node")} AND {_KINDS.format(v="node")}
RETURN node.id, score
ORDER BY score DESC, node.id
LIMIT $k
"""

# One row whatever happens: how many entries the index returned (orphans are dropped by the
# server), and those of the namespace and kinds.
VECTOR_QUERY = f"""
CALL db.idx.vector.queryNodes('{NODE_LABEL}', 'embedding', $k2, vecf32($v)) YIELD node, score
WITH count(node) AS raw,
     collect(CASE WHEN {_VISIBLE.format(v="node")} AND {_KINDS.format(v="node")}
                  THEN [node.id, score] END) AS hits
RETURN raw, hits
"""

# Exact nearest neighbours within one namespace (through its range index): the answer when the
# vector index, which cannot pre-filter, gave every entry it may and other namespaces' nodes
# filled them. `score` is the cosine distance, as `queryNodes` gives it.
VECTOR_SCAN_QUERY = f"""
MATCH (node:{NODE_LABEL})
WHERE {_VISIBLE.format(v="node")} AND {_KINDS.format(v="node")} AND node.embedding IS NOT NULL
WITH node.id AS id, vec.cosineDistance(node.embedding, vecf32($v)) AS score
RETURN id, score
ORDER BY score, id
LIMIT $k
"""

EDGE_QUERY = f"""
CALL db.idx.fulltext.queryRelationships($t, $q) YIELD relationship, score
WITH relationship AS e, score
WHERE e.namespace = $ns
WITH e, score, startNode(e) AS a, endNode(e) AS b
WHERE a.namespace = $ns AND b.namespace = $ns AND a:{NODE_LABEL} AND b:{NODE_LABEL}
RETURN a.id, b.id, score, e.note, e.status, e.role, e.confidence, e.evidence_id
ORDER BY score DESC, a.id, b.id
LIMIT $k
"""

# Packs (frontier position, internal id of the source) into one integer, so that a plain min()
# picks both the earliest source and a handle to seek it by (ids < 2**40, positions < 2**22).
_POS_SHIFT = 1 << 40
MAX_WALK_LIMIT = 1 << 20


def walk_query(relation_types: Sequence[str], direction: Direction) -> str:
    """One BFS round: the unseen visible nodes one edge away from the frontier, one row each.

    `$frontier` holds `[position, id]` in walk order (seed rank first). Each new node is claimed
    by its earliest frontier node; among their edges, the first by (relation type, 'out' before
    'in') is reported. Rows come out ordered by (frontier position, id), cut at `$remaining`.

    Shape, for speed (measured on FalkorDB 4.16.3): the WITH before the second MATCH makes the
    planner start from the frontier (as one pattern it scanned every node for `b` and walked
    back); the claim is a min() over one integer instead of a sort of every candidate edge; the
    source is then found again by internal id (indexing `$frontier[pos]` per row is slow) and
    only the surviving (source, node) pairs are sorted; already-seen nodes are excluded by
    internal id (`$seen_int`, cheaper than comparing strings) and, for the seeds, by id.
    """
    types = ":" + "|".join(f"`{t}`" for t in relation_types) if relation_types else ""
    if direction == "out":
        first, again, dir_expr = (f"(a)-[e{types}]->(b:{NODE_LABEL})", f"(a)-[e{types}]->(b)",
                                  "'out'")
    elif direction == "in":
        first, again, dir_expr = (f"(a)<-[e{types}]-(b:{NODE_LABEL})", f"(a)<-[e{types}]-(b)",
                                  "'in'")
    else:
        first, again = f"(a)-[e{types}]-(b:{NODE_LABEL})", f"(a)-[e{types}]-(b)"
        dir_expr = "CASE WHEN id(startNode(e)) = id(a) THEN 'out' ELSE 'in' END"
    return f"""
UNWIND $frontier AS f
MATCH (a:{NODE_LABEL} {{id: f[1]}})
WHERE a.namespace = $ns
WITH a, f[0] AS pos
MATCH {first}
WHERE {_VISIBLE.format(v="b")} AND NOT id(b) IN $seen_int AND NOT b.id IN $seeds
WITH b, min(pos * {_POS_SHIFT} + id(a)) AS key
WITH b, key / {_POS_SHIFT} AS pos, key % {_POS_SHIFT} AS aid
ORDER BY pos, b.id
LIMIT $remaining
MATCH (a) WHERE id(a) = aid
WITH a, b, pos
MATCH {again}
WITH a, b, pos, type(e) AS t, {dir_expr} AS dir, e
ORDER BY pos, b.id, t, dir DESC
WITH a, b, pos, collect([t, dir, e.note, e.status, e.role, e.confidence, e.evidence_id])[0]
     AS best
RETURN id(b), b.id, pos, a.id, best
ORDER BY pos, b.id
"""


def fulltext_query(text: str) -> str:
    """RediSearch query matching any word of `text`, or "" when it holds no word.

    Everything but word characters is dropped (RediSearch treats most punctuation as operators
    and splits indexed text on it anyway), tokens are de-duplicated and OR-ed. Tokens with
    non-ASCII letters also go in lower, upper and capitalized form (ASCII-only case folding).
    """
    tokens: dict[str, None] = {}
    for match in _WORD.finditer(text):
        token = match.group()[:MAX_TOKEN_CHARS]
        if not token.strip("_"):  # a bare "_" is a RediSearch syntax error
            continue
        variants = [token]
        if not token.isascii():
            variants += [token.lower(), token.upper(), token.capitalize()]
        for variant in variants:
            tokens.setdefault(variant, None)
        if len(tokens) >= MAX_QUERY_TOKENS:
            break
    return "|".join(list(tokens)[:MAX_QUERY_TOKENS])
