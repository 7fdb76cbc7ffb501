"""Conversation memory: the write-through publisher, the message extractors, the session
summariser and its summarisers, memory search and its pure rules (where, MMR, summary text),
with their ports and SQL (`store/`). Its values are in `pipeline/domain/memory_*.py`."""
