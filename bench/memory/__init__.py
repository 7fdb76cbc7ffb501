"""Conversation memory on LoCoMo: recall, GET latency, summary lag and integrity through the real
pipeline (`python -m bench.memory`), and what a message is indexed by (`variants`)."""
