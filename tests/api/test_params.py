"""Boolean query parameters read as upstream's parameter codec reads them."""

from __future__ import annotations

import pytest

from controlplane.api.params import flag


@pytest.mark.parametrize(("value", "expected"), [
    ("true", True), ("True", True), ("1", True), ("yes", True), ("", True),
    ("false", False), ("False", False), ("FALSE", False), ("0", False),
])
def test_only_false_and_0_are_false(value: str, expected: bool) -> None:
    assert flag({"watch": value}, "watch") is expected


def test_an_absent_flag_is_none() -> None:
    assert flag({"watchX": "true"}, "watch") is None
