"""The write side: end-to-end ingestion (`python -m bench.ingest`), the write path's own cost per
document (`leanwrites`), and what two write-side reads cost (`writecost`)."""
