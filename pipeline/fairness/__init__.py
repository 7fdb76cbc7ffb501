"""A fair share for every tenant of the API: what one key may hold at once (requests in flight
across the API's processes, pooled read connections of one process) and how often it may
publish. The API's middleware says which tenant a request acts for (`tenant.acting_as`); the
read pool and the publishing threads consult it."""
