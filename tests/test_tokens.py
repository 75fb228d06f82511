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


def test_a_duplicate_token_takes_the_later_record_with_a_warning() -> None:
    # kube-apiserver's tokenfile.NewCSV: the later record replaces the earlier in its map
    warnings: list[str] = []
    entries = parse_token_csv("t,a,1\nu,b,2\nt,c,3,ops\n", source="tokens.csv", warn=warnings.append)
    assert entries == [TokenEntry("t", "c", "3", ("ops",)), TokenEntry("u", "b", "2")]
    assert warnings == ["duplicate token has been found in token file 'tokens.csv', record number '3'"]


def test_an_empty_token_is_skipped_with_a_warning() -> None:
    warnings: list[str] = []
    entries = parse_token_csv("\n,alice,1\nt,bob,2\n", source="tokens.csv", warn=warnings.append)
    assert entries == [TokenEntry("t", "bob", "2")]
    assert warnings == ["empty token has been found in token file 'tokens.csv', record number '1'"]
    assert parse_token_csv(",alice,1\n") == []  # no warn: silent


def test_too_few_columns_is_refused_in_kube_apiservers_words() -> None:
    with pytest.raises(TokenFileError) as e:
        parse_token_csv("t0,admin,0\nt1,alice\n", source="tokens.csv")
    assert str(e.value) == ("token file 'tokens.csv' must have at least 3 columns "
                            "(token, user name, user uid), found 2")


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
