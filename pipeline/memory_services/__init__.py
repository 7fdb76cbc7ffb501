"""Conversation memory's services: the message extractors, the session summariser and its
summarisers, and memory search, with their ports (`ports.py`).

A wing apart from `pipeline/memory/` (values and pure rules) because the services use the core's
ports (`pipeline/ports.py`: embedder, dead letters, extractor), and those ports trade memory's
values: in one folder the two would import each other.
"""
