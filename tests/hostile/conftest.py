"""Hostile cases (issue 10): every test here runs on the real stack and asserts the documented
outcome of an attacker's or an unlucky operator's input. Shared fixtures come from the root
conftest (`stack_settings`, `catalog`, `procs`, `publisher`)."""
