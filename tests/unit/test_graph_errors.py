"""The one FalkorDB error translator, and the capabilities read from `CALL db.indexes()` (pure)."""

from __future__ import annotations

import pytest
import redis.exceptions as redis_errors

from pipeline.domain.errors import ConfigError, GraphUnavailable
from pipeline.graph.falkordb.errors import graph_errors
from pipeline.graph.falkordb.schema import NODE_LABEL, index_row, parse_capabilities

OUTAGES = [
    redis_errors.ConnectionError("Connection refused"),
    redis_errors.TimeoutError("Timeout reading from socket"),
    redis_errors.BusyLoadingError("Redis is loading the dataset in memory"),
    redis_errors.ReadOnlyError("You can't write against a read only replica."),
    redis_errors.TryAgainError("TRYAGAIN"),
    redis_errors.ClusterDownError("CLUSTERDOWN"),
    ConnectionResetError("Connection reset by peer"),
    TimeoutError("timed out"),
    # Transient replies: the writer's and the reader's lists used to differ ("LOADING").
    redis_errors.ResponseError("Max pending queries exceeded"),
    redis_errors.ResponseError("Query timed out"),
    redis_errors.ResponseError("LOADING FalkorDB is loading the dataset"),
]


@pytest.mark.parametrize("exc", OUTAGES, ids=lambda e: f"{type(e).__name__}:{e}")
def test_outages_become_graph_unavailable(exc: Exception) -> None:
    with pytest.raises(GraphUnavailable, match="graph") as caught, graph_errors("upsert nodes"):
        raise exc
    assert "upsert nodes" in caught.value.message
    assert caught.value.__cause__ is exc


@pytest.mark.parametrize("exc", [redis_errors.AuthenticationError("invalid password"),
                                 redis_errors.AuthorizationError("not authorized"),
                                 redis_errors.NoPermissionError("NOPERM")],
                         ids=lambda e: type(e).__name__)
def test_bad_credentials_are_a_config_error(exc: Exception) -> None:
    with pytest.raises(ConfigError, match="graph") as caught, graph_errors("connect"):
        raise exc
    assert caught.value.field == "falkordb_url"


@pytest.mark.parametrize("exc", [redis_errors.ResponseError("errMsg: Invalid input 'x'"),
                                 ValueError("not a graph error")],
                         ids=lambda e: type(e).__name__)
def test_anything_else_stays_as_it_is(exc: Exception) -> None:
    with pytest.raises(type(exc)) as caught, graph_errors("find edges"):
        raise exc
    assert caught.value is exc


def test_nested_translators_translate_once() -> None:
    with pytest.raises(GraphUnavailable, match="during inner") as caught, \
            graph_errors("outer"), graph_errors("inner"):
        raise redis_errors.ConnectionError("Connection refused")
    assert isinstance(caught.value.__cause__, redis_errors.ConnectionError)


def test_capabilities_from_index_rows() -> None:
    rows = [index_row(r) for r in [
        [NODE_LABEL, {"id": ["RANGE"]}, {}, "NODE", "OPERATIONAL"],
        [NODE_LABEL, {"title": ["FULLTEXT"], "index_text": ["FULLTEXT"]}, None, "NODE",
         "OPERATIONAL"],
        [NODE_LABEL, {"embedding": ["VECTOR"]}, {"embedding": {"dimension": 8}}, "NODE",
         "OPERATIONAL"],
        ["CITES", {"note": ["FULLTEXT"]}, {}, "RELATIONSHIP", "OPERATIONAL"],
        ["LINKS", {"note": ["RANGE"]}, {}, "RELATIONSHIP", "OPERATIONAL"],
        ["Other", {"embedding": ["VECTOR"]}, {"embedding": {"dimension": 3}}, "NODE",
         "OPERATIONAL"],
    ]]
    caps = parse_capabilities(rows)
    assert caps.node_fulltext and caps.vector_dim == 8
    assert caps.edge_fulltext_types == frozenset({"CITES"})
    empty = parse_capabilities([])
    assert not empty.node_fulltext and empty.vector_dim is None and not empty.edge_fulltext_types
