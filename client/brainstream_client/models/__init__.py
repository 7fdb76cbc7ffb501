"""The request and response models of the API, one module per area (`read`: search, find,
objects, errors; `graph`; `entities`; `memory`), checked against the API's OpenAPI document by
the test suite. The most used are exported by `brainstream_client` itself."""
