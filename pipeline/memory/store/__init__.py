"""Conversation memory's SQL: the memory events' writes, the extractors' and summariser's work,
reads for the API, and memory search."""
