"""A vector as a query parameter, formatted once.

The falkordb client writes parameters into the query's `CYPHER` header through
`falkordb.helpers.stringify_param_value`, one Python call (and its type checks) per list element:
with a node's 256 to 1,024 components that was a quarter of the relay's object lane under the
ingest benchmark's steady stream (py-spy, 56 of 223 samples). A value of a type it does not know
is written as `str(value)`; `VectorParam` is one, formatted in one `%` operation with nine
significant digits, which round-trip every float32 exactly: FalkorDB keeps vectors as float32
(`vecf32`), so the stored vector is the one the client's text gave
(`tests/unit/test_graph_params.py` holds it to that). 100 nodes of 256 components: 23.6 ms
through the client, 5.2 ms so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


class VectorParam:
    """A list of floats whose parameter text is built once, at C speed, float32-exact."""

    __slots__ = ("dim", "finite", "text")

    def __init__(self, values: Iterable[float]) -> None:
        floats = [float(x) for x in values]
        self.dim = len(floats)
        self.finite = all(map(math.isfinite, floats))
        self.text = "[" + ",".join(["%.9g"] * len(floats)) % tuple(floats) + "]"

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"VectorParam({self.text})"
