"""What the settings groups of several wings share: values given as JSON text, and the URL a
local client reaches a server by."""

from __future__ import annotations

import json


def parse_json_object(value: object) -> object:
    """A setting given as JSON text (an environment variable) becomes the object it spells."""
    if isinstance(value, str):
        try:
            return json.loads(value) if value.strip() else {}
        except json.JSONDecodeError as exc:
            raise ValueError(f"must be a JSON object: {exc.msg}") from exc
    return value


def local_http_url(host: str, port: int) -> str:
    """The URL a client on this machine reaches a server bound to `host`:`port` by (a wildcard
    bind on loopback; an IPv6 address in brackets): `up` asking the API whether it answers,
    the MCP server's default API address."""
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
