"""The service factory: how the read side's adapters are built and wired, in one place that
both the API (`api/app.py`) and the benchmarks (`bench/`) use.

- `build_services(settings) -> Services`: the engine, graph queries, recipes, catalog and the
  adapters under them, for one index generation (`Services.check()`, `Services.close()`).
- `ActiveServices(base, publish)`: follows the active index generation, publishing a new
  `Services` on each switch (`start()`, `close()`).
- `freeze_startup_heap()`: once the services are built, keep the collector off their heap.
- `QueryEmbedderLoader(settings)` and `query_embedder(current)`: the query embedder the engine
  takes, loaded again in the background while it fails.
"""

from __future__ import annotations

from pipeline.wiring.embedder import QueryEmbedderLoader
from pipeline.wiring.generations import ActiveServices
from pipeline.wiring.services import (
    Services,
    build_services,
    freeze_startup_heap,
    query_embedder,
)

__all__ = ["ActiveServices", "QueryEmbedderLoader", "Services", "build_services",
           "freeze_startup_heap", "query_embedder"]
