"""The CloudEvents Subscriptions API filter dialects (subscriptions/spec.md,
3.2.4), from the spec's text and examples and from the CloudEvents SQL TCK's
subscriptions_api_recreations.yaml (the same cases written as filters)."""

from __future__ import annotations

from typing import Any

import pytest

from cstrie.content import ContentIndex
from cstrie.content.cloudevents import event_fields, filter_criteria

BASE = {"specversion": "1.0", "id": "base-id", "source": "/base", "type": "base.type"}


def passes(filters: Any, **attrs: Any) -> bool:
    idx = ContentIndex()
    idx.bind(filter_criteria(filters), "sink")
    event = {**BASE, **attrs}
    got = idx.match(event_fields(event)) == ["sink"]
    assert got == filter_criteria(filters).test(event_fields(event))
    return got


def test_spec_examples() -> None:
    exact = {"exact": {"type": "com.github.push", "subject": "https://github.com/cloudevents/spec"}}
    assert passes(exact, type="com.github.push", subject="https://github.com/cloudevents/spec")
    assert not passes(exact, type="com.github.push", subject="other")
    prefix = {"prefix": {"type": "com.github.", "subject": "https://github.com/cloudevents"}}
    assert passes(prefix, type="com.github.push", subject="https://github.com/cloudevents/spec")
    assert not passes(prefix, type="com.gitlab.push", subject="https://github.com/cloudevents")
    suffix = {"suffix": {"type": ".created", "subject": "/cloudevents/spec"}}
    assert passes(suffix, type="repo.created", subject="github.com/cloudevents/spec")
    assert not passes(suffix, type="repo.deleted", subject="github.com/cloudevents/spec")
    both = [{"exact": {"type": "com.github.push"}}, {"exact": {"subject": "s"}}]
    assert passes({"all": both}, type="com.github.push", subject="s")
    assert not passes({"all": both}, type="com.github.push")
    assert passes({"any": both}, subject="s")
    assert not passes({"any": both}, subject="t")
    assert not passes({"not": {"exact": {"type": "com.github.push"}}}, type="com.github.push")
    assert passes({"not": {"exact": {"type": "com.github.push"}}}, type="x")


def test_filters_array_is_a_conjunction_and_empty_is_true() -> None:
    assert passes([])
    assert passes(None)
    f = [{"prefix": {"type": "com."}}, {"suffix": {"type": ".push"}}]
    assert passes(f, type="com.github.push")
    assert not passes(f, type="com.github.pull")


def test_comparisons_are_case_sensitive() -> None:
    assert not passes({"exact": {"type": "Com.X"}}, type="com.x")
    assert not passes({"prefix": {"type": "COM."}}, type="com.x")


# subscriptions_api_recreations.yaml: (filters, event overrides, result)
RECREATIONS: list[tuple[str, Any, dict[str, Any], bool]] = [
    ("prefix 1", {"prefix": {"source": "https://"}}, {"source": "https://example.com"}, True),
    ("prefix 2", {"prefix": {"source": "https://"}}, {"source": "http://example.com"}, False),
    ("prefix ext", {"prefix": {"myext": "custom"}}, {"myext": "customext"}, True),
    ("prefix missing ext", {"prefix": {"myext": "custom"}}, {}, False),
    ("suffix 1", {"suffix": {"type": ".error"}}, {"type": "com.github.error"}, True),
    ("suffix 2", {"suffix": {"type": ".error"}}, {"type": "com.github.success"}, False),
    ("suffix ext", {"suffix": {"myext": "ext"}}, {"myext": "customext"}, True),
    ("suffix missing ext", {"suffix": {"myext": "ext"}}, {}, False),
    ("exact 1", {"exact": {"id": "myId"}}, {"id": "myId"}, True),
    ("exact 2", {"exact": {"id": "myId"}}, {"id": "notmyId"}, False),
    ("exact ext", {"exact": {"myext": "customext"}}, {"myext": "customext"}, True),
    ("exact missing ext", {"exact": {"myext": "customext"}}, {}, False),
    (
        "prefix and suffix 1",
        [{"prefix": {"id": "my"}}, {"suffix": {"source": ".ca"}}],
        {"id": "myId", "source": "http://www.some-website.ca"},
        True,
    ),
    (
        "prefix and suffix 2",
        [{"prefix": {"id": "my"}}, {"suffix": {"source": ".ca"}}],
        {"id": "myId", "source": "http://www.some-website.com"},
        False,
    ),
    (
        "prefix and suffix 3",
        {"all": [{"prefix": {"myext": "custom"}}, {"suffix": {"type": ".error"}}]},
        {"myext": "customext", "type": "com.github.error"},
        True,
    ),
    (
        "prefix and suffix 4",
        {"all": [{"prefix": {"type": "example."}}, {"prefix": {"myext": "custom"}}]},
        {"type": "example.event.type"},
        False,
    ),
]
_OR = {"any": [{"prefix": {"id": "my"}}, {"suffix": {"source": ".ca"}}]}
for n, (i, s, ok) in enumerate(
    [
        ("myId", "http://www.some-website.ca", True),
        ("myId", "http://www.some-website.com", True),
        ("notmyId", "http://www.some-website.ca", True),
        ("notmyId", "http://www.some-website.com", False),
    ],
    start=1,
):
    RECREATIONS.append((f"prefix or suffix {n}", _OR, {"id": i, "source": s}, ok))
_DNF = {
    "any": [
        {"all": [{"exact": {"id": "myId"}}, {"suffix": {"type": ".success"}}]},
        {
            "all": [
                {"exact": {"id": "notmyId"}},
                {"prefix": {"source": "http://"}},
                {"suffix": {"type": ".warning"}},
            ]
        },
    ]
}
RECREATIONS += [
    ("dnf 1", _DNF, {"id": "myId", "type": "example.event.success"}, True),
    (
        "dnf 2",
        _DNF,
        {"id": "notmyId", "type": "example.event.warning", "source": "http://localhost.localdomain"},
        True,
    ),
    (
        "dnf 3",
        _DNF,
        {"id": "notmyId", "type": "example.event.warning", "source": "https://localhost.localdomain"},
        False,
    ),
]
_CNF = [
    {"any": [{"exact": {"id": "myId"}}, {"suffix": {"type": ".success"}}]},
    {
        "any": [
            {"exact": {"id": "notmyId"}},
            {"prefix": {"source": "https://"}},
            {"suffix": {"type": ".warning"}},
        ]
    },
]
_HTTP = "http://localhost.localdomain"
RECREATIONS += [
    ("cnf 1", _CNF, {"id": "myId", "type": "example.event.warning", "source": _HTTP}, True),
    ("cnf 2", _CNF, {"id": "notmyId", "type": "example.event.success", "source": _HTTP}, True),
    ("cnf 3", _CNF, {"id": "notmyId", "type": "example.event.warning", "source": _HTTP}, False),
    ("cnf 4", _CNF, {"id": "myId", "type": "example.event.success", "source": _HTTP}, False),
    (
        "cnf 5",
        [*_CNF, {"exact": {"myext": "customext"}}],
        {"id": "myId", "type": "example.event.warning", "source": _HTTP},
        False,
    ),
]


@pytest.mark.parametrize(("filters", "attrs", "result"), [r[1:] for r in RECREATIONS],
                         ids=[r[0] for r in RECREATIONS])
def test_tck_recreations(filters: Any, attrs: dict[str, Any], result: bool) -> None:
    assert passes(filters, **attrs) is result


def test_absent_attribute_under_not_is_true() -> None:
    assert passes({"not": {"exact": {"myext": "x"}}})
    assert passes({"not": {"prefix": {"myext": "x"}}}, myext=None)  # null: absent


def test_canonical_strings_of_other_types() -> None:
    assert passes({"exact": {"flag": "true"}}, flag=True)
    assert passes({"exact": {"count": "-42"}}, count=-42)
    assert passes({"exact": {"blob": "AAE="}}, blob=b"\x00\x01")
    assert not passes({"exact": {"data": "x"}}, data="x")  # the payload is no attribute
    with pytest.raises(TypeError, match="'ratio'"):
        event_fields({"ratio": 0.5})


@pytest.mark.parametrize(
    ("filters", "error"),
    [
        ({"exact": {"": "x"}}, ValueError),
        ({"exact": {"type": ""}}, ValueError),
        ({"exact": {"Type": "x"}}, ValueError),
        ({"exact": {"ty-pe": "x"}}, ValueError),
        ({"exact": {}}, ValueError),
        ({"exact": {"type": 1}}, TypeError),
        ({"exact": ["type"]}, TypeError),
        ({"all": []}, ValueError),
        ({"any": []}, ValueError),
        ({"any": {"exact": {"a": "b"}}}, TypeError),
        ({"sql": "type = 'x'"}, ValueError),
        ({"exact": {"a": "b"}, "prefix": {"a": "b"}}, ValueError),
        ({}, ValueError),
        ("exact", TypeError),
        ([{"not": [{"exact": {"a": "b"}}]}], TypeError),
    ],
)
def test_invalid_filters_are_rejected(filters: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        filter_criteria(filters)


def test_deep_filters_are_refused() -> None:
    f: Any = {"exact": {"a": "b"}}
    for _ in range(5000):
        f = {"not": f}
    with pytest.raises(ValueError, match="nested deeper"):
        filter_criteria(f)
