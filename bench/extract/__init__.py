"""Entities: extraction throughput against embedding and agreement with spaCy
(`python -m bench.extract`), where the stage's CPU goes (`profile`), and the resolver's precision
and recall (`resolution`)."""
