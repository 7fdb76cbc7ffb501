"""Schemathesis against the OpenAPI document: whatever a client sends, no 5xx, and every
response matches the documented schema."""

from __future__ import annotations

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from api.app import create_app
from tests.api.conftest import Tenant
from tests.stackutil import make_settings

pytestmark = pytest.mark.stack

# The document does not depend on settings; the calls go through the `client` fixture, whose
# app runs on the real services.
schema = schemathesis.openapi.from_dict(create_app(make_settings()).openapi())


@schema.parametrize()
@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
def test_no_server_errors_and_responses_match_the_schema(
        case: schemathesis.Case, client: TestClient, tenants: dict[str, Tenant]) -> None:
    kwargs = case.as_transport_kwargs()
    headers = {**(kwargs.pop("headers", None) or {}),
               "Authorization": f"Bearer {tenants['a'].key}"}
    response = client.request(headers=headers, **kwargs)
    assert response.status_code < 500, response.text
    # Semantic refusals of schema-valid input (a filter on a field the catalog does not make
    # filterable, an id of another tenant) are 4xx by design, so "positive data acceptance"
    # is not among the checks; every response must still be documented and well-formed.
    case.validate_response(response, checks=[not_a_server_error, status_code_conformance,
                                             content_type_conformance,
                                             response_schema_conformance])
