"""RE2 patterns and rewrite strings, translated for Python's ``re``.

TensorFlow's regex ops use RE2 in UTF-8 mode. The common syntax is shared with Python, but some
constructs mean different things, and those are translated here:

- ``\\d \\s \\w \\b`` are ASCII-only in RE2 (``\\s`` is ``[\\t\\n\\f\\r ]``, without ``\\v``).
- ``$`` outside multi-line mode matches only at the very end (Python's also before a final
  newline); ``\\z`` is Python's ``\\Z``.
- ``\\pL``, ``\\p{Lu}``, ``\\PN`` (Unicode general categories; scripts such as ``\\p{Greek}``
  raise ``UnimplementedError``) and POSIX classes such as ``[[:alpha:]]``.
- ``\\123`` is an octal escape in RE2 (a back-reference in Python); ``\\x{10FFFF}``.
- ``(?i)`` may appear anywhere and applies to the rest of its group.
- RE2 rejects back-references, look-around and ``(?<name>``; so do we, with an
  ``InvalidArgumentError``.

Subjects are decoded from UTF-8 with ``surrogateescape``, so an invalid byte becomes a lone
surrogate in U+DC80..U+DCFF; RE2 never matches invalid bytes with ``.`` or a class, so every ``.``
and negated class here excludes that range.

A pattern that can only ever match ASCII text (and never the empty string) is also compiled as a
bytes pattern: matching it on the raw UTF-8 bytes gives the same result without decoding.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from runtime.errors import InvalidArgumentError, UnimplementedError

INVALID = "\\udc80-\\udcff"  # where surrogateescape puts undecodable bytes
_NOT_INVALID = f"(?![{INVALID}])"

_DIGIT, _SPACE, _WORD = "0-9", "\\t\\n\\f\\r ", "0-9A-Za-z_"
_POSIX = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_PERL = {"d": _DIGIT, "s": _SPACE, "w": _WORD}
_WORD_BOUNDARY = f"(?:(?<=[{_WORD}])(?![{_WORD}])|(?<![{_WORD}])(?=[{_WORD}]))"
_NOT_WORD_BOUNDARY = f"(?:(?<=[{_WORD}])(?=[{_WORD}])|(?<![{_WORD}])(?![{_WORD}]))"
_CLASS_SPECIAL = set("\\]^-[&~|")
_REPEAT = re.compile(r"\{[0-9]+(?:,[0-9]*)?\}")


class PatternError(Exception):
    """The pattern is not valid RE2; the message is RE2's error text."""


def _char(code: int) -> str:
    """One code point as pattern text, escaped unless it is a plain ASCII word character."""
    if code < 0x80:
        ch = chr(code)
        return ch if ch.isalnum() or ch == "_" else f"\\x{code:02x}"
    return f"\\U{code:08x}"


@lru_cache(maxsize=1)
def _category_ranges() -> dict[str, list[tuple[int, int]]]:
    """Code point ranges of each Unicode general category (two-letter names)."""
    ranges: dict[str, list[tuple[int, int]]] = {}
    start, current = 0, unicodedata.category("\x00")
    for code in range(1, sys.maxunicode + 2):
        cat = unicodedata.category(chr(code)) if code <= sys.maxunicode else ""
        if cat != current:
            ranges.setdefault(current, []).append((start, code - 1))
            start, current = code, cat
    return ranges


def _unicode_class(name: str) -> list[tuple[int, int]]:
    cats = _category_ranges()
    if name == "Any":
        found = [(0, sys.maxunicode)]
    elif len(name) == 1 and name in "CLMNPSZ":
        # RE2's one-letter groups leave out unassigned code points (Cn).
        found = [r for cat, rs in cats.items() if cat[0] == name and cat != "Cn" for r in rs]
    elif len(name) == 2 and name in cats and name != "Cn":
        found = list(cats[name])
    else:
        raise UnimplementedError(f"Unicode class \\p{{{name}}} is not supported (only categories)")
    # Never match the surrogates that stand for undecodable bytes.
    return _unicode_minus_invalid(sorted(found))


def _complement(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out, nxt = [], 0
    for a, b in sorted(ranges):
        if a > nxt:
            out.append((nxt, a - 1))
        nxt = max(nxt, b + 1)
    if nxt <= sys.maxunicode:
        out.append((nxt, sys.maxunicode))
    return _unicode_minus_invalid(out)


def _unicode_minus_invalid(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    lo, hi = 0xDC80, 0xDCFF
    out = []
    for a, b in ranges:
        if b < lo or a > hi:
            out.append((a, b))
            continue
        if a < lo:
            out.append((a, lo - 1))
        if b > hi:
            out.append((hi + 1, b))
    return out


def _ranges_text(ranges: list[tuple[int, int]]) -> str:
    return "".join(_char(a) if a == b else f"{_char(a)}-{_char(b)}" for a, b in ranges)


@dataclass(frozen=True)
class Translated:
    pattern: str  # for ``re.compile`` on decoded text
    ascii_only: bool  # can match only ASCII text: safe to run on the raw bytes


class _Translator:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.out: list[str] = []
        self.ascii_only = True
        # One entry per open group: the flags of `(?i)`-style groups opened inside it that must
        # be closed (and reopened after each `|`) because Python scopes flags differently.
        self.frames: list[list[str]] = [[]]
        self.multiline = re.search(r"\(\?[a-zA-Z]*m", pattern) is not None
        # What the last token was, for RE2's repetition checks: "start" (nothing to repeat),
        # "atom", or "repeat" (then `quantifier` holds its text, `lazy` whether `?` followed).
        self.last = "start"
        self.quantifier = ""
        self.lazy = False

    def fail(self, message: str) -> PatternError:
        return PatternError(message)

    def run(self) -> Translated:
        p = self.p
        while self.i < len(p):
            c = p[self.i]
            repeat = _REPEAT.match(p, self.i) if c == "{" else None
            if c in "*+?" or repeat:
                self.repetition(repeat.group(0) if repeat else c)
                continue
            last = "atom"
            if c == "\\":
                self.out.append(self.escape(in_class=False))
            elif c == "[":
                self.char_class()
            elif c == "(":
                self.group()
                last = "start"
            elif c == ")":
                if len(self.frames) == 1:
                    raise self.fail(f"unexpected ): {p}")
                self.out.append(")" * len(self.frames.pop()) + ")")
                self.i += 1
            elif c == "|":
                pending = self.frames[-1]
                self.out.append(")" * len(pending) + "|" + "".join(f"(?{f}:" for f in pending))
                self.i += 1
                last = "start"
            elif c == ".":
                self.out.append(f"(?:{_NOT_INVALID}.)")
                self.ascii_only = False
                self.i += 1
            elif c == "$":
                self.out.append("$" if self.multiline else "\\Z")
                self.i += 1
            elif c == "{":
                self.out.append("\\{")  # not a repetition: a literal brace (Python reads `{,n}`)
                self.i += 1
            else:
                if ord(c) > 0x7F:
                    self.ascii_only = False
                self.out.append(c)
                self.i += 1
            self.last = last
        if len(self.frames) > 1:
            raise self.fail(f"missing ): {p}")
        self.out.append(")" * len(self.frames[0]))
        return Translated("".join(self.out), self.ascii_only)

    def repetition(self, op: str) -> None:
        if self.last == "repeat" and op == "?" and not self.lazy:
            self.lazy = True
        elif self.last == "repeat":
            lazy = "?" if self.lazy else ""
            raise self.fail(f"bad repetition operator: {self.quantifier}{lazy}{op}")
        elif self.last == "start":
            raise self.fail(f"no argument for repetition operator: {op}")
        else:
            counts = [int(n) for n in re.findall(r"\d+", op)]
            if any(n > 1000 for n in counts) or (len(counts) == 2 and counts[0] > counts[1]):
                raise self.fail(f"invalid repetition size: {op}")
            self.last, self.quantifier, self.lazy = "repeat", op, False
        self.out.append(op)
        self.i += len(op)

    def group(self) -> None:
        p, i = self.p, self.i
        if not p.startswith("(?", i):
            self.out.append("(")
            self.frames.append([])
            self.i += 1
            return
        # RE2 has no look-around, comments or back-references, and knows only (?P<name>.
        for perl in ("(?=", "(?!", "(?<", "(?#", "(?P="):
            if p.startswith(perl, i):
                raise self.fail(f"invalid perl operator: {perl}")
        named = re.match(r"\(\?P<([A-Za-z_][A-Za-z0-9_]*)>", p[i:])
        if named:
            self.out.append(f"(?P<{named.group(1)}>")
            self.frames.append([])
            self.i += named.end()
            return
        if p.startswith("(?:", i):
            self.out.append("(?:")
            self.frames.append([])
            self.i += 3
            return
        flags = re.match(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])", p[i:])
        if not flags:
            raise self.fail(f"invalid perl operator: {p[i : i + 3]}")
        on, off = flags.group(1), flags.group(2) or ""
        for f in on + off:
            if f == "U":
                raise UnimplementedError("the ungreedy flag (?U) is not supported")
            if f not in "ims":
                raise self.fail(f"invalid perl operator: {flags.group(0)}")
        if "i" in on:
            self.ascii_only = False
        spec = on + (f"-{off}" if off else "")
        self.i += flags.end()
        if flags.group(3) == ":":
            self.out.append(f"(?{spec}:")
            self.frames.append([])
        elif not self.out and len(self.frames) == 1 and not off:
            self.out.append(f"(?{spec})")  # a leading global flag group is the same in Python
        elif spec:
            # RE2 applies it to the rest of the enclosing group; Python needs a scoped group.
            self.out.append(f"(?{spec}:")
            self.frames[-1].append(spec)

    def escape(self, in_class: bool) -> str:
        p, i = self.p, self.i
        if i + 1 >= len(p):
            raise self.fail("trailing \\")
        c = p[i + 1]
        self.i += 2
        if c in "01234567":
            ahead = p[self.i : self.i + 2]
            digits = ahead[: len(ahead) - len(ahead.lstrip("01234567"))]  # up to 2 more
            if c != "0" and not digits:
                raise self.fail(f"invalid escape sequence: \\{c}")
            self.i += len(digits)
            return self.literal(int(c + digits, 8))
        if c in "89":
            raise self.fail(f"invalid escape sequence: \\{c}")
        if c == "x":
            m = re.match(r"\{([0-9A-Fa-f]{1,8})\}|([0-9A-Fa-f]{2})", p[self.i :])
            if not m or int(m.group(1) or m.group(2), 16) > sys.maxunicode:
                raise self.fail(f"invalid escape sequence: \\x{p[self.i : self.i + 2]}")
            self.i += m.end()
            return self.literal(int(m.group(1) or m.group(2), 16))
        if c in "dsw":
            return _PERL[c] if in_class else f"[{_PERL[c]}]"
        if c in "DSW":
            if in_class:
                raise UnimplementedError(f"\\{c} inside a character class is not supported")
            self.ascii_only = False
            return f"[^{_PERL[c.lower()]}{INVALID}]"
        if c in "bB" and not in_class:
            return _WORD_BOUNDARY if c == "b" else _NOT_WORD_BOUNDARY
        if c in "Az" and not in_class:
            return "\\A" if c == "A" else "\\Z"
        if c in "pP":
            return self.unicode_class(negated=c == "P", in_class=in_class)
        if c == "Q" and not in_class:
            end = p.find("\\E", self.i)
            end = len(p) if end < 0 else end
            text = p[self.i : end]
            self.i = min(len(p), end + 2)
            if any(ord(ch) > 0x7F for ch in text):
                self.ascii_only = False
            return "".join(self.literal(ord(ch)) for ch in text)
        if c == "C" and not in_class:
            # One byte, even inside a multi-byte character: no equivalent on decoded text.
            raise UnimplementedError("\\C (any byte) is not supported")
        if c in "aftnrv":
            return "\\" + c
        if not c.isalnum() and ord(c) < 0x80:
            return "\\" + c
        raise self.fail(f"invalid escape sequence: \\{c}")

    def literal(self, code: int) -> str:
        if code > 0x7F:
            self.ascii_only = False
        return _char(code)

    def unicode_class(self, negated: bool, in_class: bool) -> str:
        p = self.p
        if self.i >= len(p):
            raise self.fail("invalid character class range: \\p")
        if p[self.i] == "{":
            end = p.find("}", self.i)
            if end < 0:
                raise self.fail(f"invalid character class range: {p[self.i - 2 :]}")
            name = p[self.i + 1 : end]
            self.i = end + 1
        else:
            name = p[self.i]
            self.i += 1
        if name.startswith("^"):
            negated, name = not negated, name[1:]
        self.ascii_only = False
        ranges = _unicode_class(name)
        if negated:
            ranges = _complement(ranges)
        return _ranges_text(ranges) if in_class else f"[{_ranges_text(ranges)}]"

    def char_class(self) -> None:
        p = self.p
        self.i += 1
        negated = p.startswith("^", self.i)
        if negated:
            self.i += 1
            self.ascii_only = False
        parts: list[str] = []
        first = True
        while True:
            if self.i >= len(p):
                raise self.fail(f"missing ]: {p}")
            c = p[self.i]
            if c == "]" and not first:
                self.i += 1
                break
            if p.startswith("[:", self.i):
                end = p.find(":]", self.i + 2)
                name = p[self.i + 2 : end] if end >= 0 else ""
                if name.startswith("^"):
                    raise UnimplementedError(f"negated POSIX class [:{name}:] is not supported")
                if name not in _POSIX:
                    raise self.fail(f"invalid character class range: {p[self.i : end + 2]}")
                parts.append(_POSIX[name])
                self.i = end + 2
            elif c == "\\":
                parts.append(self.escape(in_class=True))
            elif c == "-" and parts and parts[-1] == "-":
                parts.append("\\-")  # keeps Python from reading `--` as a set operation
                self.i += 1
            elif c in _CLASS_SPECIAL and c != "-":
                parts.append("\\" + c)
                self.i += 1
            else:
                if ord(c) > 0x7F:
                    self.ascii_only = False
                parts.append(c)
                self.i += 1
            first = False
        body = "".join(parts)
        self.out.append(f"[^{body}{INVALID}]" if negated else f"[{body}]")


def translate(pattern: str) -> Translated:
    return _Translator(pattern).run()


def _min_width(compiled: re.Pattern[str]) -> int:
    """Shortest possible match length; 0 when unknown."""
    try:
        from re import _parser  # type: ignore[attr-defined]  # private: not in typeshed

        return int(_parser.parse(compiled.pattern, compiled.flags).getwidth()[0])
    except Exception:  # noqa: BLE001  (a private API: any failure just means "unknown")
        return 0


@dataclass(frozen=True)
class Regex:
    """A compiled RE2 pattern: ``text`` matches decoded subjects, ``raw`` (if any) bytes."""

    text: re.Pattern[str]
    raw: re.Pattern[bytes] | None
    groups: int
    can_match_empty: bool


@lru_cache(maxsize=256)
def compile_re2(pattern: bytes) -> Regex:
    """Compile an RE2 pattern, raising ``InvalidArgumentError`` as TensorFlow does."""
    shown = pattern.decode("utf-8", "replace")
    try:
        try:
            source = pattern.decode("utf-8")
        except UnicodeDecodeError:
            raise PatternError("invalid UTF-8") from None
        translated = translate(source)
        compiled = re.compile(translated.pattern)
    except (PatternError, re.error) as err:
        raise InvalidArgumentError(f"Invalid pattern: {shown}, error: {err}") from None
    empty = _min_width(compiled) == 0
    raw = None
    if translated.ascii_only and not empty:
        raw = re.compile(translated.pattern.encode("ascii"))
    return Regex(compiled, raw, compiled.groups, empty)


@dataclass(frozen=True)
class Rewrite:
    """An RE2 rewrite string: literal text and ``\\N`` group references."""

    pieces: tuple[str | int, ...]  # text, or a group number
    valid: bool  # False: RE2 stops at a bad escape (the pieces hold what came before it)
    max_group: int

    def expand(self, match: re.Match[str]) -> str:
        return "".join(
            piece if isinstance(piece, str) else (match.group(piece) or "") for piece in self.pieces
        )

    def expand_bytes(self, match: re.Match[bytes]) -> bytes:
        return b"".join(
            piece.encode("utf-8", "surrogateescape")
            if isinstance(piece, str)
            else (match.group(piece) or b"")
            for piece in self.pieces
        )


@lru_cache(maxsize=256)
def parse_rewrite(rewrite: bytes) -> Rewrite:
    text = rewrite.decode("utf-8", "surrogateescape")
    pieces: list[str | int] = []
    literal: list[str] = []
    valid, i = True, 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            literal.append(c)
            i += 1
            continue
        nxt = text[i + 1] if i + 1 < len(text) else ""
        i += 2
        if nxt.isdigit() and nxt.isascii():
            if literal:
                pieces.append("".join(literal))
                literal = []
            pieces.append(int(nxt))
        elif nxt == "\\":
            literal.append("\\")
        else:
            valid = False
            break
    if literal:
        pieces.append("".join(literal))
    return Rewrite(tuple(pieces), valid, _max_submatch(text))


def _max_submatch(text: str) -> int:
    """The highest ``\\N`` in a rewrite, scanned as RE2 does (over all of it)."""
    highest, i = 0, 0
    while i < len(text):
        if text[i] == "\\":
            i += 1
            if i < len(text) and text[i].isascii() and text[i].isdigit():
                highest = max(highest, int(text[i]))
        i += 1
    return highest
