"""Fairness between tenants: tenant B's search latency and errors through the real API with
tenant A idle and hostile (`python -m bench.fairness`)."""
