"""Go's regular expressions (RE2 syntax, package ``regexp``): what a CRD's ``pattern`` means
to kube-apiserver, which compiles it with Go's ``regexp.Compile``.

A pattern is matched by RE2 itself (Google's ``re2`` binding, ``google-re2``), whose syntax and
meaning are Go's (leftmost-first, ``$`` the end of the text, ASCII ``\\d \\w \\s``, Unicode
classes, the ``U`` flag) and whose time is linear in the value: a pattern such as ``^(a+)+$``
that would make a backtracking engine run for ever on a long value cannot stall the server.

Whether Go accepts a pattern, and Go's message when it does not, come from checking its text
as Go's parser would, which RE2's own messages do not give. That check walks a translation of
the pattern into Python's ``re`` syntax, kept because it finds what Go refuses on the way:

- Flags set mid-expression (``^(?i)(abort|warn)?$``, prometheus-operator's PrometheusRule) last
  to the end of the enclosing group in Go; ``re`` takes global flags only at the start, so each
  becomes a scoped group ``(?i:...)``, closed and reopened around a ``|`` of its level.
- Without the ``m`` flag Go's ``$`` is the end of the text (``\\z``); ``re``'s also matches before a
  final newline, so it becomes ``\\Z`` (which is ``re``'s end of text); ``\\z`` becomes ``\\Z`` too.
- ``\\d``, ``\\w``, ``\\s`` and ``\\b`` are ASCII in Go: ``re.ASCII``.
- ``\\Q...\\E`` is quoted literal text; ``\\x{263a}`` a code point.
- What Go refuses is refused with Go's message (``error parsing regexp: invalid or unsupported
  Perl syntax: `(?=```): lookarounds, backreferences, ``\\Z``, escaped letters Go does not know,
  nested repetitions (``a**``, possessive ``a*+``), repeat counts above 1000, unbalanced
  parentheses and brackets.

Unicode classes (``\\pL``, ``\\p{Greek}``) and the ungreedy flag ``U`` have no ``re`` form, but are
valid and matched by RE2 as Go matches them. A pattern the check passes and RE2 refuses
(none is known) gives None from :func:`compile_go`, and callers leave values unchecked::

    >>> compile_go("^(?i)(abort|warn)?$").match("WARN") is not None
    True
    >>> syntax_error("^(?=a)")
    'error parsing regexp: invalid or unsupported Perl syntax: `(?=`'
"""

from __future__ import annotations

import functools
import re
from typing import Any, Protocol

import re2

__all__ = ["Pattern", "compile_go", "syntax_error"]


class Pattern(Protocol):
    """A compiled pattern (RE2's, whose ``re``-like methods these are)."""

    def search(self, text: str) -> Any: ...

    def match(self, text: str) -> Any: ...


# RE2 logs each pattern it refuses to stderr unless told not to (refusals are answered here)
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False

_MAX_REPEAT = 1000
_GO_LETTER_ESCAPES = set("aAbBdDfnprsStvwWxzQEP")  # every other escaped letter is an error in Go
_CLASS_LETTER_ESCAPES = set("dDfnprsStvwWxP") | {"a"}
_POSIX = {"alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ",
          "cntrl": "\\x00-\\x1f\\x7f", "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~",
          "punct": "!-/:-@\\[-`{-~", "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z", "word": "0-9A-Za-z_",
          "xdigit": "0-9A-Fa-f"}
_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")
_FLAGS = re.compile(r"\(\?([imsU]*)(?:-([imsU]*))?([:)])")
_NAMED = re.compile(r"\(\?P?<([A-Za-z0-9_]+)>")


class GoSyntaxError(ValueError):
    """A pattern Go's ``regexp.Compile`` refuses; the message is Go's."""

    def __init__(self, code: str, expr: str) -> None:
        super().__init__(f"error parsing regexp: {code}: `{expr}`")


class _Untranslatable(Exception):
    """Valid Go syntax that ``re`` cannot express."""


class _Group:
    """An open group: the flags in force in it and the scoped ``(?flags:`` groups opened in it."""

    def __init__(self, flags: frozenset[str]) -> None:
        self.flags = flags
        self.scoped: list[str] = []  # the opening text of each scoped group, to reopen after a `|`


def _translate(pattern: str) -> str:
    out: list[str] = []
    groups = [_Group(frozenset())]
    can_repeat = False  # an atom precedes: a repetition operator has an argument
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        group = groups[-1]
        if c == "\\":
            text, i = _escape(pattern, i, group.flags)
            out.append(text)
            can_repeat = True
            continue
        if c == "[":
            text, i = _char_class(pattern, i)
            out.append(text)
            can_repeat = True
            continue
        if c in "*+?" or (c == "{" and _REPEAT.match(pattern, i)):
            i = _repetition(pattern, i, can_repeat, out)
            can_repeat = False
            continue
        if c == "(":
            i = _open_group(pattern, i, groups, out)
            can_repeat = False
            continue
        if c == ")":
            if len(groups) == 1:
                raise GoSyntaxError("unexpected )", pattern)
            out.append(")" * (len(group.scoped) + 1))
            groups.pop()
            can_repeat = True
        elif c == "|":
            out.append(")" * len(group.scoped) + "|" + "".join(group.scoped))
            can_repeat = False
        elif c == "$":
            out.append("$" if "m" in group.flags else r"\Z")
            can_repeat = True
        else:
            out.append("\\{" if c == "{" else c)  # re reads `{,5}` as a repetition, Go as text
            can_repeat = True
        i += 1
    if len(groups) > 1:
        raise GoSyntaxError("missing closing )", pattern)
    out.append(")" * len(groups[0].scoped))
    return "".join(out)


def _open_group(pattern: str, i: int, groups: list[_Group], out: list[str]) -> int:
    """Translate the group opening at ``pattern[i]``; return the index after it."""
    group = groups[-1]
    if not pattern.startswith("(?", i):
        groups.append(_Group(group.flags))
        out.append("(")
        return i + 1
    named = _NAMED.match(pattern, i)
    if named:
        groups.append(_Group(group.flags))
        out.append(f"(?P<{named.group(1)}>")
        return named.end()
    if pattern.startswith(("(?P<", "(?<"), i):
        end = pattern.find(">", i)
        raise GoSyntaxError("invalid named capture", pattern[i:] if end < 0 else pattern[i:end + 1])
    flags = _FLAGS.match(pattern, i)
    if not flags or (flags.group(2) is not None and not flags.group(2)):
        bad = i + 2
        while bad < len(pattern) and pattern[bad] in "imsU-":
            bad += 1
        raise GoSyntaxError("invalid or unsupported Perl syntax", pattern[i:bad + 1])
    on, off = set(flags.group(1)), set(flags.group(2) or "")
    if "U" in on | off:
        raise _Untranslatable
    now = frozenset((group.flags | on) - off)
    scoped = "(?" + "".join(sorted(on)) + ("-" + "".join(sorted(off)) if off else "") + ":"
    if flags.group(3) == ":":
        groups.append(_Group(now))
        out.append(scoped)
    else:  # (?i): to the end of the enclosing group
        group.flags = now
        group.scoped.append(scoped)
        out.append(scoped)
    return flags.end()


def _repetition(pattern: str, i: int, can_repeat: bool, out: list[str]) -> int:
    """Check the repetition operator at ``pattern[i]`` as Go does; copy it; return the index after."""
    start = i
    if pattern[i] == "{":
        count = _REPEAT.match(pattern, i)
        assert count is not None
        low, high = int(count.group(1)), count.group(3)
        if low > _MAX_REPEAT or (high and (int(high) > _MAX_REPEAT or int(high) < low)):
            raise GoSyntaxError("invalid repeat count", count.group(0))
        i = count.end()
    else:
        i += 1
    if i < len(pattern) and pattern[i] == "?":
        i += 1
    op = pattern[start:i]
    if not can_repeat:
        raise GoSyntaxError("missing argument to repetition operator", op)
    if i < len(pattern) and (pattern[i] in "*+?" or (pattern[i] == "{" and _REPEAT.match(pattern, i))):
        following = _REPEAT.match(pattern, i)
        raise GoSyntaxError("invalid nested repetition operator",
                            pattern[start:following.end() if following else i + 1])
    out.append(op)
    return i


def _escape(pattern: str, i: int, flags: frozenset[str]) -> tuple[str, int]:
    """Translate the escape at ``pattern[i]`` (outside a class); return it and the index after it."""
    if i + 1 >= len(pattern):
        raise GoSyntaxError("trailing backslash at end of expression", "")
    c = pattern[i + 1]
    if c == "Q":
        end = pattern.find("\\E", i + 2)
        literal = pattern[i + 2:] if end < 0 else pattern[i + 2:end]
        return re.escape(literal), len(pattern) if end < 0 else end + 2
    if c == "z":
        return r"\Z", i + 2
    if c in "pP":
        raise _Untranslatable
    if c == "x" and pattern.startswith("{", i + 2):
        end = pattern.find("}", i)
        digits = pattern[i + 3:end]
        if end < 0 or not re.fullmatch(r"[0-9A-Fa-f]{1,6}", digits) or int(digits, 16) > 0x10FFFF:
            raise GoSyntaxError("invalid escape sequence", pattern[i:end + 1 if end >= 0 else len(pattern)])
        return f"\\U{int(digits, 16):08x}", end + 1
    _check_escape(pattern, i, _GO_LETTER_ESCAPES)
    return pattern[i:i + 2], i + 2


def _check_escape(pattern: str, i: int, letters: set[str]) -> None:
    c = pattern[i + 1]
    if c.isdigit():
        if c == "0" or (i + 2 < len(pattern) and "0" <= pattern[i + 2] <= "7" and c <= "7"):
            return  # an octal code
        raise GoSyntaxError("invalid escape sequence", pattern[i:i + 2])
    if c.isascii() and c.isalpha() and c not in letters:
        raise GoSyntaxError("invalid escape sequence", pattern[i:i + 2])


def _char_class(pattern: str, i: int) -> tuple[str, int]:
    """Translate the class opening at ``pattern[i]``; return it and the index after its ``]``."""
    start = i
    out = ["["]
    i += 1
    if i < len(pattern) and pattern[i] == "^":
        out.append("^")
        i += 1
    first = True
    previous: str | None = None  # the last single character, for a range's check
    while i < len(pattern) and (pattern[i] != "]" or first):
        first = False
        c = pattern[i]
        posix = re.match(r"\[:(\^?)([a-z]+):\]", pattern[i:])
        if posix and posix.group(2) in _POSIX:
            if posix.group(1):
                raise _Untranslatable  # a negated POSIX class inside a class
            out.append(_POSIX[posix.group(2)])
            i += posix.end()
            previous = None
            continue
        if c == "\\":
            if i + 1 >= len(pattern):
                break
            if pattern[i + 1] in "pPQ":
                raise _Untranslatable
            _check_escape(pattern, i, _CLASS_LETTER_ESCAPES)
            out.append(pattern[i:i + 2])
            previous = pattern[i + 1] if not pattern[i + 1].isalnum() else None
            i += 2
            continue
        if c == "-" and previous is not None and i + 1 < len(pattern) and pattern[i + 1] not in "]\\":
            if pattern[i + 1] < previous:
                raise GoSyntaxError("invalid character class range", f"{previous}-{pattern[i + 1]}")
            out.append("-" + re.escape(pattern[i + 1]))
            previous = None
            i += 2
            continue
        out.append("\\" + c if c in "[&~|" else c)
        previous = c
        i += 1
    if i >= len(pattern):
        raise GoSyntaxError("missing closing ]", pattern[start:])
    out.append("]")
    return "".join(out), i + 1


@functools.lru_cache(maxsize=4096)
def _compiled(pattern: str) -> Pattern | GoSyntaxError | None:
    try:
        _translate(pattern)  # what Go refuses, in Go's words
    except GoSyntaxError as e:
        return e
    except _Untranslatable:
        pass  # valid Go that re cannot say: RE2 can
    try:
        compiled: Pattern = re2.compile(pattern, _RE2_OPTIONS)
    except re2.error:
        return None  # valid as far as the checks above go; unchecked rather than refused
    return compiled


def syntax_error(pattern: str) -> str | None:
    """Go's message for a ``pattern`` its ``regexp.Compile`` refuses, or None."""
    compiled = _compiled(pattern)
    return str(compiled) if isinstance(compiled, GoSyntaxError) else None


def compile_go(pattern: str) -> Pattern | None:
    """``pattern`` as Go reads it, compiled by RE2 (``search`` finds it anywhere in a value,
    as Go's ``MatchString``); None if it is invalid."""
    compiled = _compiled(pattern)
    return None if compiled is None or isinstance(compiled, GoSyntaxError) else compiled
