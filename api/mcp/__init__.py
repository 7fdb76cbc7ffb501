"""The MCP server (`brainstream mcp`, issue 15 item 1): the API's tools for a model, over stdio
or streamable HTTP, on the official `mcp` SDK.

A shell over the HTTP API and nothing else: every tool is one API call, so authentication,
namespaces, limits and errors are the API's own (an API error becomes a tool error carrying the
API's JSON); over HTTP the API is also asked, before any MCP message, whether the caller's key is
valid. Modules: `backend` (the HTTP calls and their errors), `gate` (the HTTP transport's key
check), `guide` (what the model reads: the instructions and the filter text built from the live
`/v1/schema`), `read_tools`, `memory_tools` and `write_tools` (the tools; `--read-only` leaves
out the last), `server` (assembly and the transports).
"""
