"""Kind catalog: loading, additive merge, put and filter validation, jsonb round trip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, strategies as st

from pipeline.domain.errors import (
    InvalidFilter,
    InvalidKindSpec,
    MissingRequiredField,
    UnknownKind,
    WrongFieldType,
)
from pipeline.domain.kinds import (
    FieldSpec,
    FieldType,
    KindCatalog,
    KindSpec,
    catalog_from_dict,
    catalog_to_dict,
    load_catalog,
    merge_catalog,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example_catalog() -> list[KindSpec]:
    return load_catalog((EXAMPLES / "kinds.yaml").read_text())


def test_example_catalog_loads() -> None:
    specs = example_catalog()
    assert [s.kind for s in specs] == ["deal", "company", "note"]
    deal = specs[0]
    assert deal.is_parent and not deal.is_part
    stage = deal.field("stage")
    assert stage == FieldSpec(
        name="stage", type="string", description="Pipeline stage", required=True,
        operators=("eq", "in"), examples=("prospect", "won", "lost"),
    )
    amount = deal.field("amount")
    assert amount is not None and amount.operators == ("eq",) and not amount.required
    author = specs[2].field("author")
    assert author is not None and author.operators == ()  # declared, not filterable
    assert deal.field("nope") is None


def test_yaml_dates_in_examples_become_iso_strings_and_nulls_mean_empty() -> None:
    specs = load_catalog(
        "kinds:\n- kind: deal\n  description:\n  fields:\n"
        "  - {name: closed, type: datetime, examples: [2027-02-28], operators: [in]}\n"
    )
    closed = specs[0].fields[0]
    assert closed.examples == ("2027-02-28",)
    assert closed.operators == ("eq", "in")  # "in" implies "eq"
    assert specs[0].description == ""


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("kinds:\n- kind: deal\n  fields:\n  - {name: stage, type: text}\n",
         "deal.fields.stage.type"),
        ("kinds:\n- kind: deal\n  fields:\n  - {name: stage, type: string, operators: [gt]}\n",
         "deal.fields.stage.operators[0]"),
        ("kinds:\n- kind: deal\n  fields:\n  - {name: stage, type: string, colour: red}\n",
         "deal.fields.stage.colour"),
        ("kinds:\n- kind: deal\n  fields:\n  - {name: 'bad name', type: string}\n",
         "deal.fields.bad name.name"),
        ("kinds:\n- kind: deal\n  fields:\n  - {type: string}\n", "deal.fields[0].name"),
        ("kinds:\n- kind: deal\n  fields:\n  - {name: stage, type: string, required: 'yes'}\n",
         "deal.fields.stage.required"),
        ("kinds:\n- kind: deal\n  fields:\n  - {name: amount, type: number, examples: [ten]}\n",
         "deal.fields.amount.examples"),
        ("kinds:\n- kind: deal\n  fields:\n  - {name: a, type: string}\n"
         "  - {name: a, type: string}\n",
         "deal.fields.a"),
        ("kinds:\n- kind: deal\n- kind: deal\n", "deal"),
        ("kinds:\n- kind: 'sales deal'\n", "sales deal.kind"),
        ("kinds:\n- description: no name\n", "kinds[0].kind"),
        ("kinds:\n- kind: deal\n  is_parent: maybe\n", "deal.is_parent"),
        ("kinds: {}\n", "kinds"),
        ("kind: deal\n", "kinds"),
        ("- kind: deal\n", None),
        ("", None),
        ("kinds: [\n", None),
    ],
)
def test_invalid_catalog_documents(text: str, field: str | None) -> None:
    with pytest.raises(InvalidKindSpec) as err:
        load_catalog(text)
    assert err.value.code == "invalid_kind_spec"
    assert err.value.field == field


def test_serialization_round_trips() -> None:
    specs = example_catalog()
    as_dict = catalog_to_dict(specs)
    assert catalog_from_dict(as_dict) == specs
    assert load_catalog(__import__("json").dumps(as_dict)) == specs


# --- merge ---------------------------------------------------------------------------------------

names = st.sampled_from(["a", "b", "c", "d", "stage", "amount"])
field_types: st.SearchStrategy[FieldType] = st.sampled_from(
    ["string", "number", "boolean", "datetime"]
)


@st.composite
def field_specs(draw: st.DrawFn) -> FieldSpec:
    return FieldSpec(
        name=draw(names),
        type=draw(field_types),
        description=draw(st.sampled_from(["", "x", "y"])),
        required=draw(st.booleans()),
        operators=draw(st.sampled_from([(), ("eq",), ("eq", "in")])),
        examples=(),
    )


@st.composite
def kind_specs(draw: st.DrawFn) -> KindSpec:
    fields = draw(st.lists(field_specs(), max_size=4, unique_by=lambda f: f.name))
    return KindSpec(
        kind=draw(st.sampled_from(["deal", "company", "note"])),
        description=draw(st.sampled_from(["", "d"])),
        is_parent=draw(st.booleans()),
        fields=tuple(fields),
    )


catalogs = st.lists(kind_specs(), max_size=3, unique_by=lambda k: k.kind)


def field_types_of(specs: list[KindSpec]) -> dict[tuple[str, str], str]:
    return {(s.kind, f.name): f.type for s in specs for f in s.fields}


@given(catalogs)
def test_merge_is_idempotent(specs: list[KindSpec]) -> None:
    assert merge_catalog(specs, specs) == specs
    assert merge_catalog([], specs) == specs
    assert merge_catalog(specs, []) == specs


@given(catalogs, catalogs)
def test_merge_never_removes_and_is_idempotent_per_apply(
    existing: list[KindSpec], incoming: list[KindSpec]
) -> None:
    old, new = field_types_of(existing), field_types_of(incoming)
    conflict = any(old[k] != t for k, t in new.items() if k in old)
    if conflict:
        with pytest.raises(InvalidKindSpec) as err:
            merge_catalog(existing, incoming)
        assert err.value.field is not None and err.value.field.endswith(".type")
        return
    merged = merge_catalog(existing, incoming)
    merged_types = field_types_of(merged)
    assert set(old) | set(new) == set(merged_types)  # nothing removed, everything added
    assert {s.kind for s in merged} == {s.kind for s in existing} | {s.kind for s in incoming}
    assert merge_catalog(merged, incoming) == merged
    for spec in incoming:  # what the file says about operators and required wins
        got = next(s for s in merged if s.kind == spec.kind)
        for f in spec.fields:
            merged_field = got.field(f.name)
            assert merged_field is not None
            assert (merged_field.operators, merged_field.required) == (f.operators, f.required)


def test_merge_updates_docs_but_refuses_a_type_change() -> None:
    base = example_catalog()
    update = load_catalog(
        "kinds:\n- kind: deal\n  fields:\n"
        "  - {name: stage, type: string, description: Sales stage, operators: [eq]}\n"
        "  - {name: owner, type: string}\n- kind: ticket\n"
    )
    merged = merge_catalog(base, update)
    assert [s.kind for s in merged] == ["deal", "company", "note", "ticket"]
    deal = merged[0]
    assert [f.name for f in deal.fields] == ["stage", "amount", "close_date", "owner"]
    stage = deal.field("stage")
    assert stage is not None
    assert stage.description == "Sales stage" and stage.operators == ("eq",)
    assert stage.examples == ("prospect", "won", "lost")  # omitted examples are kept
    assert deal.description == "A sales opportunity."

    retype = load_catalog("kinds:\n- kind: deal\n  fields:\n  - {name: amount, type: string}\n")
    with pytest.raises(InvalidKindSpec) as err:
        merge_catalog(base, retype)
    assert err.value.field == "deal.fields.amount.type"


# --- validation ----------------------------------------------------------------------------------


def test_open_catalog_accepts_everything() -> None:
    catalog = KindCatalog([])
    assert catalog.is_open
    catalog.validate_put("anything", {"x": {"nested": 1}})
    assert catalog.validate_filter(["anything"], "x", "in") is None
    with pytest.raises(InvalidFilter):
        catalog.validate_filter(None, "x; drop table", "eq")


def test_valid_puts_pass() -> None:
    catalog = KindCatalog(example_catalog())
    assert not catalog.is_open
    catalog.validate_put(
        "deal",
        {"stage": "won", "amount": 1.5, "close_date": "2027-02-28T00:00:00Z", "extra": {"x": 1}},
    )
    catalog.validate_put("deal", {"stage": ["won", "lost"], "amount": 3, "close_date": None})
    catalog.validate_put("company", {"public": True, "industry": None})


@pytest.mark.parametrize(
    ("kind", "props", "error", "field"),
    [
        ("ticket", {}, UnknownKind, "data.kind"),
        ("deal", {}, MissingRequiredField, "data.properties.stage"),
        ("deal", {"stage": None}, MissingRequiredField, "data.properties.stage"),
        ("deal", {"stage": []}, MissingRequiredField, "data.properties.stage"),
        ("deal", {"stage": 5}, WrongFieldType, "data.properties.stage"),
        ("deal", {"stage": ["won", 5]}, WrongFieldType, "data.properties.stage"),
        ("deal", {"stage": "won", "amount": True}, WrongFieldType, "data.properties.amount"),
        ("deal", {"stage": "won", "amount": "10"}, WrongFieldType, "data.properties.amount"),
        ("deal", {"stage": "won", "amount": float("nan")}, WrongFieldType,
         "data.properties.amount"),
        ("deal", {"stage": "won", "close_date": "next week"}, WrongFieldType,
         "data.properties.close_date"),
        ("deal", {"stage": "won", "close_date": 1700000000}, WrongFieldType,
         "data.properties.close_date"),
        ("company", {"public": "yes"}, WrongFieldType, "data.properties.public"),
        ("company", {"public": 1}, WrongFieldType, "data.properties.public"),
    ],
)
def test_invalid_puts(kind: str, props: dict[str, Any], error: type[Exception], field: str) -> None:
    catalog = KindCatalog(example_catalog())
    with pytest.raises(error) as err:
        catalog.validate_put(kind, props)
    assert getattr(err.value, "field", None) == field


def test_filters_only_on_declared_filterable_fields() -> None:
    catalog = KindCatalog(example_catalog())
    stage = catalog.validate_filter(["deal"], "stage", "in")
    assert stage is not None and stage.name == "stage"
    assert catalog.validate_filter(None, "industry", "eq") is not None
    assert catalog.validate_filter(["deal", "company"], "industry", "eq") is not None
    assert [f.name for f in catalog.filterable_fields("deal")] == ["stage", "amount",
                                                                   "close_date"]
    for kinds, name, op, field in [
        (["note"], "author", "eq", "filters.author"),  # declared, but not filterable
        (["deal"], "industry", "eq", "filters.industry"),  # filterable, but on another kind
        (None, "undeclared", "eq", "filters.undeclared"),
        (["ticket"], "stage", "eq", "kinds"),
        (["deal"], "stage", "gt", "filters.stage"),
    ]:
        with pytest.raises(InvalidFilter) as err:
            catalog.validate_filter(kinds, name, op)  # type: ignore[arg-type]
        assert (err.value.code, err.value.field) == ("invalid_filter", field)

    eq_only = KindCatalog(load_catalog(
        "kinds:\n- kind: deal\n  fields:\n  - {name: stage, type: string, operators: [eq]}\n"
    ))
    eq_only.validate_filter(["deal"], "stage", "eq")
    with pytest.raises(InvalidFilter):
        eq_only.validate_filter(["deal"], "stage", "in")
