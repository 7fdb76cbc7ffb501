"""What the FalkorDB adapters read of the settings: where the graph is, its name, and the
dimension of the vectors its nodes carry (from the stack's and the embedding's groups; the
whole `Settings`, or a generation's, has them)."""

from __future__ import annotations

from typing import Protocol


class GraphSettings(Protocol):
    """The graph's address, name and vector dimension."""

    @property
    def effective_falkordb_url(self) -> str: ...

    @property
    def graph_name(self) -> str: ...

    @property
    def vector_dim(self) -> int: ...
