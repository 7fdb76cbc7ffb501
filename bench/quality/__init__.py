"""Retrieval quality: SciFact and HotpotQA through the real pipeline (`python -m bench.quality`),
and whether half-precision vectors keep it (`halfvec`)."""
