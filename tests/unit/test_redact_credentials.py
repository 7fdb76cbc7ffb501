"""No secret on the wire (issue 35, item 9): every address printed, logged or returned passes
`redact_credentials`, which masks a URL's password and the password parameters of both DSN
forms, and leaves what tells an operator which server (scheme, user, host, port, database)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st
from psycopg.conninfo import make_conninfo

from pipeline.domain.setting_values import MASK, redact_credentials

SECRET = "hunter2-Zq9"


@pytest.mark.parametrize(("address", "shown"), [
    (f"postgresql://app:{SECRET}@db:5432/kb", f"postgresql://app:{MASK}@db:5432/kb"),
    (f"postgresql://app:{SECRET}@db/kb?sslmode=require&sslpassword={SECRET}",
     f"postgresql://app:{MASK}@db/kb?sslmode=require&sslpassword={MASK}"),
    (f"postgresql://app@db/kb?password={SECRET}", f"postgresql://app@db/kb?password={MASK}"),
    (f"host=db port=5432 user=app password={SECRET} dbname=kb",
     f"host=db port=5432 user=app password={MASK} dbname=kb"),
    (f"host=db password = '{SECRET} with \\' quote' dbname=kb",
     f"host=db password = {MASK} dbname=kb"),
    (f"redis://:{SECRET}@cache:6379/0", f"redis://:{MASK}@cache:6379/0"),
    (f"rediss://default:{SECRET}@cache:6380", f"rediss://default:{MASK}@cache:6380"),
    (f"redis://:p@ss{SECRET}@cache:6379/0", f"redis://:{MASK}@cache:6379/0"),
    ("postgresql://postgres@127.0.0.1:5432/brainstream",
     "postgresql://postgres@127.0.0.1:5432/brainstream"),
    ("127.0.0.1:9092", "127.0.0.1:9092"),
    (f"OperationalError: connection to postgresql://app:{SECRET}@db failed",
     f"OperationalError: connection to postgresql://app:{MASK}@db failed"),
])
def test_addresses_lose_their_credentials_only(address: str, shown: str) -> None:
    assert redact_credentials(address) == shown


def test_a_generations_dsn_in_keyword_form_is_masked() -> None:
    """A generation's DSN is the base one rewritten by make_conninfo: `key=value` form."""
    dsn = make_conninfo(f"postgresql://app:{SECRET}@db:5432/kb", dbname="kb_g2")
    assert SECRET in dsn and "dbname=kb_g2" in dsn
    shown = redact_credentials(dsn)
    assert SECRET not in shown and "dbname=kb_g2" in shown and "host=db" in shown


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Zs", "Cc"),
                                      blacklist_characters="/@?#'\\"), min_size=1, max_size=40))
def test_any_password_is_masked(password: str) -> None:
    for address in (f"postgresql://app:{password}@db/kb", f"host=db password={password}",
                    f"redis://:{password}@cache:6379/0"):
        assert MASK in redact_credentials(address)
        if len(password) > 3:  # a short one may happen to spell part of the rest
            assert password not in redact_credentials(address).replace(MASK, "")
