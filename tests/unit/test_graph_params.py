"""`VectorParam` gives FalkorDB the float32 vector the client's text for the list gives."""

from __future__ import annotations

import math

import numpy as np
from falkordb.helpers import stringify_param_value

from pipeline.graph.falkordb.params import VectorParam


def test_a_vector_param_is_written_as_the_client_writes_the_list() -> None:
    rng = np.random.default_rng(7)
    values = [float(x) for x in rng.standard_normal(384).astype(np.float32)]
    values += [0.0, -0.0, 1e-38, 3.4e38, 1.0, -1.5]
    param = VectorParam(values)
    assert param.dim == len(values) and param.finite
    text = stringify_param_value(param)
    assert text.startswith("[") and text.endswith("]")
    ours = np.array([float(x) for x in text[1:-1].split(",")], dtype=np.float32)
    client = stringify_param_value(values)
    theirs = np.array([float(x) for x in client[1:-1].split(",")], dtype=np.float32)
    assert ours.tobytes() == theirs.tobytes()  # bit for bit, -0.0 included
    row = stringify_param_value({"id": "a", "embedding": param})
    assert row == '{`id`:"a",`embedding`:' + text + "}"


def test_a_vector_param_knows_when_it_is_not_finite() -> None:
    assert not VectorParam([0.1, math.nan]).finite
    assert not VectorParam([math.inf]).finite
    assert VectorParam([]).dim == 0
