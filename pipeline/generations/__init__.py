"""Index generations as every process reads them (`active.py`); operators change them with
`pipeline/ops/generations.py`."""
