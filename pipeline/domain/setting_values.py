"""What the settings groups of several wings share: values given as JSON text, the URL a
local client reaches a server by, and addresses with their credentials masked for display."""

from __future__ import annotations

import json
import re


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


# What stands for a secret wherever a value is shown (`brainstream config`, addresses).
MASK = "********"
# A URL's user information (`scheme://user:password@host`): everything up to the netloc's last
# `@`, as urlsplit reads it; the password is what follows the first `:`.
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^:@/\s?#]*)"
                           r":(?P<password>[^/\s?#]*)@")
# Secrets given as parameters: a URL's query (`?password=x&sslpassword=y`) and libpq's
# `key=value` form (`host=db password='a b'`, which make_conninfo writes for a generation's DSN).
_SECRET_PARAMETER = re.compile(
    r"(?P<key>\b(?:ssl)?password|\bpasswd|\bsecret|\btoken|\bapi_?key)(?P<eq>\s*=\s*)"
    r"(?P<value>'(?:[^'\\]|\\.)*'|[^\s&'#]+)", re.IGNORECASE)


def redact_credentials(text: str) -> str:
    """`text` (an address, a DSN, an error message that quotes one) with every credential it
    carries masked: the password of each `scheme://user:password@` URL, and password-like
    parameters of a URL's query or of a libpq `key=value` DSN. The user name and host stay:
    they tell an operator which server and role, and are no secret. Everything an address is
    printed, logged or returned through passes here (status, services, up, the operator page)."""
    text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    return _SECRET_PARAMETER.sub(lambda m: f"{m['key']}{m['eq']}{MASK}", text)
