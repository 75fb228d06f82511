"""A write's query options held to upstream's Validate{Create,Update,Patch}Options: every
problem one cause of a single 422 against the verb's options kind, worded as field.Error."""

from __future__ import annotations

import pytest

from controlplane.api.apply import APPLY_YAML
from controlplane.api.errors import ApiError
from controlplane.api.writeoptions import check_write_options


def causes(method: str, query: dict[str, str], patch_type: str = "") -> tuple[str, list[str]]:
    with pytest.raises(ApiError) as err:
        check_write_options(method, query, patch_type)
    assert err.value.code == 422 and err.value.details is not None
    return err.value.details["kind"], [f"{c['field']}: {c['message']}" for c in err.value.details["causes"]]


def test_valid_options_pass_and_reads_have_none() -> None:
    check_write_options("POST", {"fieldManager": "kubectl-client-side-apply", "dryRun": "All",
                                 "fieldValidation": "Strict"})
    check_write_options("PATCH", {"fieldManager": "m", "force": "true"}, APPLY_YAML)
    check_write_options("GET", {"dryRun": "x", "fieldManager": "\x01"})


def test_each_problem_is_a_cause_of_the_verbs_options_kind() -> None:
    assert causes("POST", {"fieldManager": "a\x01b\x7f", "dryRun": "Some", "fieldValidation": "Loose"}) == (
        "CreateOptions", ['fieldManager: Invalid value: "a\\x01b\\x7f": invalid character U+0001 (at position 1)',
                          'fieldManager: Invalid value: "a\\x01b\\x7f": invalid character U+007F (at position 3)',
                          'dryRun: Unsupported value: ["Some"]: supported values: "All"',
                          'fieldValidation: Unsupported value: "Loose": supported values: "", "Ignore", "Strict", '
                          '"Warn"'])
    # 128 bytes, not characters: 65 two-byte runes are too long
    assert causes("PUT", {"fieldManager": "\u00e9" * 65}) == (
        "UpdateOptions", ["fieldManager: Too long: may not be more than 128 bytes"])
    check_write_options("PUT", {"fieldManager": "\u00e9" * 64})


def test_a_patch_is_checked_against_its_type_first() -> None:
    assert causes("PATCH", {"dryRun": "x"}, APPLY_YAML) == (
        "PatchOptions", ["fieldManager: Required value: is required for apply patch",
                         'dryRun: Unsupported value: ["x"]: supported values: "All"'])
    assert causes("PATCH", {"force": "false"}, "application/merge-patch+json") == (
        "PatchOptions", ["force: Forbidden: may not be specified for non-apply patch"])
