from __future__ import annotations

import doctest
import stat
from pathlib import Path

import pytest

import controlplane.tokens
from controlplane.tokens import (
    TokenEntry,
    TokenFileError,
    find_admin,
    new_admin,
    parse_token_csv,
    read_token_file,
    write_token_file,
)


def test_doctests() -> None:
    assert doctest.testmod(controlplane.tokens).failed == 0


def test_parse_kube_apiserver_format() -> None:
    text = '\nt1,alice,1001\nt2, bob ,1002,"dev,ops"\nt3,carol,1003,system:masters\n\n'
    assert parse_token_csv(text) == [
        TokenEntry("t1", "alice", "1001"),
        TokenEntry("t2", "bob", "1002", ("dev", "ops")),
        TokenEntry("t3", "carol", "1003", ("system:masters",)),
    ]


def test_duplicate_token_keeps_the_first_user() -> None:
    assert [e.user for e in parse_token_csv("t,a,1\nt,b,2\n")] == ["a"]


@pytest.mark.parametrize("text", ["t1,alice\n", ",alice,1\n"])
def test_malformed_lines_are_refused_with_their_line_number(text: str) -> None:
    with pytest.raises(TokenFileError, match=r"tokens\.csv:1"):
        parse_token_csv(text, source="tokens.csv")


def test_round_trip_through_a_private_file(tmp_path: Path) -> None:
    entries = [new_admin(), TokenEntry("t,with,commas", 'quo"te', "7", ("a", "b"))]
    path = tmp_path / "tokens.csv"
    write_token_file(path, entries)
    assert read_token_file(path) == entries
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_new_admin_is_a_random_master() -> None:
    a, b = new_admin(), new_admin()
    assert a.token != b.token
    assert len(a.token) >= 43
    assert a.groups == ("system:masters",)
    assert find_admin([TokenEntry("x", "u", "1"), a, b]) == a
    assert find_admin([TokenEntry("x", "u", "1", ("dev",))]) is None
