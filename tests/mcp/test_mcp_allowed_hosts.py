"""MCP_ALLOWED_HOSTS and MCP_ALLOWED_ORIGINS: the defaults a bind address gives (loopback forms;
a wildcard bind answers loopback only) and the values refused at start. The real stack's proof
that the SDK applies them is test_mcp_http_gate.py."""

from __future__ import annotations

import pytest

from pipeline.domain.errors import ConfigError
from pipeline.domain.setting_values import bound_hosts, origins_of
from pipeline.settings import load_settings

LOOPBACK = ["127.0.0.1:8765", "localhost:8765", "[::1]:8765"]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "0.0.0.0", "::", ""])
def test_loopback_and_wildcard_binds_answer_the_loopback_names(host: str) -> None:
    assert bound_hosts(host, 8765) == LOOPBACK


def test_a_named_bind_answers_its_name_too() -> None:
    assert bound_hosts("10.0.0.5", 8765) == ["10.0.0.5:8765", *LOOPBACK]
    assert bound_hosts("fd00::5", 8765) == ["[fd00::5]:8765", *LOOPBACK]


def test_the_origins_follow_the_hosts() -> None:
    assert origins_of(["kb.example.com", "x:*"]) == [
        "http://kb.example.com", "https://kb.example.com", "http://x:*", "https://x:*"]


@pytest.mark.parametrize(("name", "value"), [
    ("MCP_ALLOWED_HOSTS", "[]"), ("MCP_ALLOWED_HOSTS", '["https://kb.example.com"]'),
    ("MCP_ALLOWED_HOSTS", '["kb.example.com/mcp"]'), ("MCP_ALLOWED_HOSTS", '"kb.example.com"'),
    ("MCP_ALLOWED_ORIGINS", "[]"), ("MCP_ALLOWED_ORIGINS", '["kb.example.com"]'),
    ("MCP_ALLOWED_ORIGINS", '["https://kb.example.com/"]')])
def test_a_bad_list_is_refused_naming_the_setting(
        name: str, value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"BRAINSTREAM_{name}", value)
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert f"BRAINSTREAM_{name}" in str(refused.value)


def test_good_lists_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAINSTREAM_MCP_ALLOWED_HOSTS", '["kb.example.com", "mcp_1:*"]')
    monkeypatch.setenv("BRAINSTREAM_MCP_ALLOWED_ORIGINS", '["https://app.example.com:8443"]')
    settings = load_settings()
    assert settings.mcp_allowed_hosts == ["kb.example.com", "mcp_1:*"]
    assert settings.mcp_allowed_origins == ["https://app.example.com:8443"]
