"""The headers every answer carries so that a browser holding an API key on this origin runs
nothing but this origin's own files: a Content-Security-Policy per kind of page, `nosniff`,
and no framing.

- The explorer (`/ui`) loads its scripts and styles from this origin only: no inline script,
  style or handler (api/ui/ has none; cytoscape's one injected stylesheet is pre-empted in
  index.html), no plugin, no `<base>`, forms post only here, and no page may frame it.
- The OpenAPI page (`/docs`) is FastAPI's Swagger UI page, served from this origin too
  (api/routes/ui.py): its one inline script is allowed by its sha256 alone, and its stylesheet's
  icons are `data:` images.
- Every other answer is JSON, text or a file: `default-src 'none'`, so a body a browser is
  tricked into rendering can load and run nothing.
"""

from __future__ import annotations

import base64
import hashlib
import re

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_FRAMING = "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
UI_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
             f"connect-src 'self'; form-action 'self'; {_FRAMING}")
API_POLICY = f"default-src 'none'; form-action 'none'; {_FRAMING}"
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def page_policy(html: str) -> str:
    """The policy of a page whose inline scripts are exactly those of `html` (each allowed by
    its sha256): this origin's files, `data:` images, nothing else."""
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"
        for script in _INLINE_SCRIPT.findall(html))
    return (f"default-src 'self'; script-src 'self' {hashes}; style-src 'self'; "
            f"img-src 'self' data:; connect-src 'self'; form-action 'self'; {_FRAMING}")


class SecurityHeaders:
    """ASGI middleware: the policy of the path's page and the headers of every answer (set
    unless the route set its own)."""

    def __init__(self, app: ASGIApp, *, docs_policy: str) -> None:
        self.app = app
        self.docs_policy = docs_policy

    def policy(self, path: str) -> str:
        """The Content-Security-Policy of an answer at `path`."""
        if path == "/ui" or path.startswith("/ui/"):
            return UI_POLICY
        if path == "/docs":
            return self.docs_policy
        return API_POLICY

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = self.policy(scope["path"])

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("Content-Security-Policy", policy)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                headers.setdefault("X-Frame-Options", "DENY")  # frame-ancestors for old browsers
                headers.setdefault("Referrer-Policy", "no-referrer")
            await send(message)

        await self.app(scope, receive, send_with_headers)
