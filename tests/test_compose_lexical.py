"""Static check of the compose stack's lexical indexes (no Docker needed): with LEXICAL_ENGINE
tantivy (the default) every api replica keeps its own lexical replica under <data_dir>/lexical,
built from Postgres and following its change log; no container shares it (Tantivy's files are
not for a network volume, and `--scale api=N` must give each replica its own)."""

from __future__ import annotations

import re
from typing import Any

from tests.test_compose import DOCKERFILE, _environment, compose, services

__all__ = ["compose", "services"]  # the fixtures, shared with tests/test_compose.py


def test_each_api_replica_keeps_its_own_lexical_replica(compose: dict[str, Any],
                                                        services: dict[str, Any]) -> None:
    data_dir = _environment(services["api"])["BRAINSTREAM_DATA_DIR"]
    for name, service in services.items():
        mounts = [str(v).split(":")[1] for v in service.get("volumes") or [] if ":" in str(v)]
        assert not any(m.startswith(f"{data_dir}") for m in mounts), (name, mounts)
    assert not any("lexical" in str(v) for v in compose.get("volumes") or {})
    # the image creates the directory, owned by the app's user, for the replica's follower
    assert re.search(rf"mkdir -p {re.escape(data_dir)}/lexical", DOCKERFILE.read_text())
