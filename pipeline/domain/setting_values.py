"""What the settings groups of several wings share: values given as JSON text, the URL a
local client reaches a server by, the Host and Origin headers a server bound to an address
answers, and addresses with their credentials masked for display."""

from __future__ import annotations

import json
import re

# The wildcard binds: a client on this machine reaches them on loopback.
WILDCARD_HOSTS = ("", "0.0.0.0", "::")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
# A Host header as the MCP SDK compares it: a name or address, an optional port or `*`.
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(:(\d{1,5}|\*))?$")
# An Origin header: scheme, host and optional port, no path.
_ORIGIN = re.compile(r"^https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(:(\d{1,5}|\*))?$")


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
    if host in WILDCARD_HOSTS:
        host = "127.0.0.1"
    return f"http://{host_header(host, port)}"


def host_header(host: str, port: int | str) -> str:
    """The Host header of a request to `host`:`port` (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bound_hosts(host: str, port: int) -> list[str]:
    """The Host headers a server bound to `host`:`port` answers by default: the bind address
    (unless a wildcard) and the loopback forms. A wildcard bind still answers loopback only, so
    a server reached under another name needs that name configured, never a blind 0.0.0.0."""
    named = [] if host in WILDCARD_HOSTS or host in LOOPBACK_HOSTS else [host]
    return [host_header(h, port) for h in (*named, *LOOPBACK_HOSTS)]


def origins_of(hosts: list[str]) -> list[str]:
    """The browser origins of these Host headers: same-origin pages over http and https."""
    return [f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")]


def check_allowed_hosts(value: list[str] | None) -> list[str] | None:
    """A list of Host headers to answer: at least one, each a name or address with an optional
    port or `:*` (no scheme, no path)."""
    if value is None:
        return None
    if not value:
        raise ValueError("name at least one host (unset it for the default)")
    bad = [h for h in value if not _HOST.match(h)]
    if bad:
        raise ValueError(f"not a Host header (name, name:port or name:*): {bad[0]!r}")
    return value


def check_allowed_origins(value: list[str] | None) -> list[str] | None:
    """A list of Origin headers to accept: at least one, each `http(s)://name` with an optional
    port or `:*`, no path."""
    if value is None:
        return None
    if not value:
        raise ValueError("name at least one origin (unset it for the default)")
    bad = [o for o in value if not _ORIGIN.match(o)]
    if bad:
        raise ValueError(f"not an origin (https://name[:port], no path): {bad[0]!r}")
    return value


# What stands for a secret wherever a value is shown (`brainstream config`, addresses).
MASK = "********"
# A URL's user information (`scheme://user:password@host`): everything up to the netloc's last
# `@`, as urlsplit reads it; the password is what follows the first `:`.
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^:@/\s?#]*)"
                           r":(?P<password>[^/\s?#]*)@")
# Secrets given as parameters: a URL's query (`?password=x&sslpassword=y`: the value ends at
# `&` or `#`), and libpq's `key=value` form (`host=db password='a b'`, which make_conninfo
# writes for a generation's DSN: an unquoted value ends only at white space, `&` included).
_SECRET_KEY = r"(?P<key>(?:ssl)?password|passwd|secret|token|api_?key)"
_QUERY_SECRET = re.compile(r"(?<=[?&])" + _SECRET_KEY + r"(?P<eq>=)(?P<value>[^&#\s]*)",
                           re.IGNORECASE)
_KEYWORD_SECRET = re.compile(r"(?:(?<=\s)|^)" + _SECRET_KEY
                             + r"(?P<eq>\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*'|[^\s']+)",
                             re.IGNORECASE)


def redact_credentials(text: str) -> str:
    """`text` (an address, a DSN, an error message that quotes one) with every credential it
    carries masked: the password of each `scheme://user:password@` URL, and password-like
    parameters of a URL's query or of a libpq `key=value` DSN. The user name and host stay:
    they tell an operator which server and role, and are no secret. Everything an address is
    printed, logged or returned through passes here (status, services, up, the operator page)."""
    text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    text = _QUERY_SECRET.sub(lambda m: f"{m['key']}{m['eq']}{MASK}", text)
    return _KEYWORD_SECRET.sub(lambda m: f"{m['key']}{m['eq']}{MASK}", text)
