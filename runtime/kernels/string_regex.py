"""CPU kernels: RE2 regular expressions: (Static)RegexReplace, (Static)RegexFullMatch.

Patterns run on RE2 itself (the ``google-re2`` binding), as in TensorFlow: the same syntax, the
same leftmost-first matching, and time linear in the input whatever the pattern, so a pattern
sent in a request cannot stall the process by backtracking. Patterns are compiled with RE2's
default options (UTF-8), as TensorFlow's kernels do; subjects are matched as raw bytes.

The binding's ``sub`` follows Python's ``re`` (template syntax, empty matches right after a
match), so replacement is done here as ``RE2::Replace`` and ``RE2::GlobalReplace`` do it, over
``RE2::Match``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from re2 import _re2

from runtime.errors import InvalidArgumentError, OpError
from runtime.kernels.registry import NodeContext, kernel
from runtime.kernels.string_common import (
    attr_bytes,
    flat_strings,
    reject_when_run,
    shape_text,
    string_array,
)

# The binding's extension module: RE2's own interface. Its re-style layer (``re2.compile``) adds
# a generator and a match object to every search, which here would be most of the cost.
_UNANCHORED = _re2.RE2.Anchor.UNANCHORED
_ANCHOR_BOTH = _re2.RE2.Anchor.ANCHOR_BOTH

Spans = list[tuple[int, int]]  # (start, end) of the match and each group; (-1, -1) for none


class Regex:
    """A compiled RE2 pattern; safe to share between threads (RE2 matches without locks, and
    the binding lets go of the GIL while it does)."""

    __slots__ = ("groups", "match")

    def __init__(self, compiled: Any) -> None:
        self.groups: int = compiled.NumberOfCapturingGroups()
        # match(anchor, text, pos, endpos) -> Spans, with spans[0] == (-1, -1) when none.
        self.match: Callable[[Any, bytes, int, int], Spans] = compiled.Match

    def search(self, text: bytes, pos: int = 0) -> Spans | None:
        spans = self.match(_UNANCHORED, text, pos, len(text))
        return None if spans[0][0] < 0 else spans

    def fullmatch(self, text: bytes) -> bool:
        return self.match(_ANCHOR_BOTH, text, 0, len(text))[0][0] >= 0


def _options(capture: bool) -> Any:
    options = _re2.RE2.Options()  # RE2's defaults, UTF-8 among them, as TensorFlow's kernels
    options.log_errors = False  # a bad pattern is reported to the caller, not on stderr
    # Without captures RE2 answers from its DFA alone; with them it also runs a submatch engine.
    options.never_capture = not capture
    return options


_OPTIONS = {True: _options(True), False: _options(False)}

# TensorFlow links an RE2 older than the binding's: it knows named groups only as (?P<name>...)
# and reports any other "(?<" group as a bad Perl operator. Swapping "(?<" for "(?'" (a bad
# operator to every RE2) shows where the older parser would have stopped.
_ANGLE_GROUP, _BAD_OPERATOR = b"(?<", b"(?'"


def _compile_error(pattern: bytes, options: Any) -> str | None:
    if _ANGLE_GROUP in pattern:
        probe = _re2.RE2(pattern.replace(_ANGLE_GROUP, _BAD_OPERATOR), options)
        if not probe.ok() and probe.error() == b"invalid perl operator: " + _BAD_OPERATOR:
            return "invalid perl operator: (?<"
    return None


# Kept small: each RE2 may grow its DFA cache to RE2's default max_mem (8 MiB), and the patterns of
# RegexReplace and RegexFullMatch come from requests. The Static ops hold their own compiled one.
@lru_cache(maxsize=32)
def compile_re2(pattern: bytes, capture: bool = True) -> Regex:
    """Compile an RE2 pattern, raising ``InvalidArgumentError`` with TensorFlow's message."""
    options = _OPTIONS[capture]
    error = _compile_error(pattern, options)
    if error is None:
        compiled = _re2.RE2(pattern, options)
        if compiled.ok():
            return Regex(compiled)
        error = bytes(compiled.error()).decode("utf-8", "replace")
    shown = pattern.decode("utf-8", "replace")
    raise InvalidArgumentError(f"Invalid pattern: {shown}, error: {error}")


@dataclass(frozen=True)
class Rewrite:
    """An RE2 rewrite string: literal bytes and ``\\0``..``\\9`` group references."""

    pieces: tuple[bytes | int, ...]  # literal text, or a group number
    valid: bool  # False: a bad escape, where RE2's Rewrite() stops (pieces hold what came before)
    max_group: int  # RE2's MaxSubmatch(): the highest \N anywhere in it, even past a bad escape

    def expand(self, text: bytes, spans: Spans) -> bytes:
        out = []
        for piece in self.pieces:
            if isinstance(piece, bytes):
                out.append(piece)
            else:
                start, end = spans[piece]
                if start >= 0:  # a group that took no part in the match adds nothing
                    out.append(text[start:end])
        return b"".join(out)


_BACKSLASH, _ZERO, _NINE = ord("\\"), ord("0"), ord("9")


@lru_cache(maxsize=256)
def parse_rewrite(rewrite: bytes) -> Rewrite:
    pieces: list[bytes | int] = []
    literal = bytearray()
    valid, i, n = True, 0, len(rewrite)
    while i < n:
        c = rewrite[i]
        if c != _BACKSLASH:
            literal.append(c)
            i += 1
            continue
        nxt = rewrite[i + 1] if i + 1 < n else -1
        i += 2
        if _ZERO <= nxt <= _NINE:
            if literal:
                pieces.append(bytes(literal))
                literal.clear()
            pieces.append(nxt - _ZERO)
        elif nxt == _BACKSLASH:
            literal.append(_BACKSLASH)
        else:
            valid = False
            break
    if literal:
        pieces.append(bytes(literal))
    return Rewrite(tuple(pieces), valid, _max_submatch(rewrite))


def _max_submatch(rewrite: bytes) -> int:
    highest, i, n = 0, 0, len(rewrite)
    while i < n:
        if rewrite[i] == _BACKSLASH:
            i += 1
            if i < n and _ZERO <= rewrite[i] <= _NINE:
                highest = max(highest, rewrite[i] - _ZERO)
        i += 1
    return highest


def rune_length(text: bytes, pos: int) -> int:
    """How far GlobalReplace steps past a refused empty match at ``pos``: one UTF-8 character
    as RE2's ``fullrune``/``chartorune`` read it (surrogates included), else one byte."""
    left = len(text) - pos
    if left <= 0:
        return 1
    c = text[pos]
    if c < 0xC0 or c >= 0xF8:  # ASCII, a stray continuation byte, or no UTF-8 lead byte
        return 1
    need = 2 if c < 0xE0 else 3 if c < 0xF0 else 4
    if left < need:
        return 1  # not a full rune: RE2 copies one byte
    value = c & (0x1F if need == 2 else 0x0F if need == 3 else 0x07)
    for k in range(1, need):
        b = text[pos + k]
        if b & 0xC0 != 0x80:
            return 1
        value = (value << 6) | (b & 0x3F)
    smallest = (0x80, 0x800, 0x10000)[need - 2]
    if value < smallest or value > 0x10FFFF:  # over-long, or past Unicode: one byte
        return 1
    return need


def global_replace(regex: Regex, rewrite: Rewrite, text: bytes) -> bytes:
    """``RE2::GlobalReplace``: every match from left to right, never an empty match where the
    previous one ended (the loop copies one character there and searches on)."""
    out: list[bytes] = []
    pos, last_end, count, n = 0, -1, 0, len(text)
    match = regex.match
    while pos <= n:
        spans = match(_UNANCHORED, text, pos, n)
        start, end = spans[0]
        if start < 0:
            break
        if pos < start:
            out.append(text[pos:start])
        if start == end and start == last_end:
            step = rune_length(text, pos)
            out.append(text[pos : pos + step])
            pos += step
            continue
        # An invalid rewrite still adds what came before its bad escape: RE2 ignores the
        # failure of Rewrite() here.
        out.append(rewrite.expand(text, spans))
        pos = last_end = end
        count += 1
    if count == 0:
        return text
    out.append(text[pos:])
    return b"".join(out)


def replace_first(regex: Regex, rewrite: Rewrite, text: bytes) -> bytes:
    """``RE2::Replace``: the first match only; an invalid rewrite changes nothing."""
    spans = regex.search(text)
    if spans is None or not rewrite.valid:
        return text
    start, end = spans[0]
    return text[:start] + rewrite.expand(text, spans) + text[end:]


def make_replacer(
    pattern: bytes, rewrite_text: bytes, replace_global: bool
) -> Callable[[bytes], bytes]:
    rewrite = parse_rewrite(rewrite_text)
    regex = compile_re2(pattern)  # validates the pattern, and counts its groups
    if rewrite.max_group > regex.groups or (not rewrite.valid and not replace_global):
        # RE2 replaces nothing when the rewrite names a missing group, and Replace() nothing
        # when the rewrite has a bad escape.
        return lambda s: s
    if rewrite.max_group == 0:  # only the whole match is needed: no submatch engine
        regex = compile_re2(pattern, capture=False)
    replace = global_replace if replace_global else replace_first
    return lambda s: replace(regex, rewrite, s)


def _replace_all(replacer: Callable[[bytes], bytes], x: np.ndarray) -> np.ndarray:
    return string_array(list(map(replacer, flat_strings(x))), x.shape)


@kernel("StaticRegexReplace")
def static_regex_replace(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    pattern = attr_bytes(node.attr("pattern"))
    rewrite = attr_bytes(node.attr("rewrite"))
    replace_global = bool(node.attr("replace_global"))
    try:
        replacer = make_replacer(pattern, rewrite, replace_global)
    except OpError as err:  # an invalid pattern fails the run, not the load
        return reject_when_run(err)
    return lambda x: _replace_all(replacer, x)


def _scalar(x: np.ndarray, what: str) -> bytes:
    if x.ndim != 0:
        raise InvalidArgumentError(f"{what} must be scalar, but received {shape_text(x.shape)}")
    return attr_bytes(x.item())


@kernel("RegexReplace")
def regex_replace(node: NodeContext) -> Callable[..., np.ndarray]:
    replace_global = bool(node.attr("replace_global"))

    def run(x: np.ndarray, pattern: np.ndarray, rewrite: np.ndarray) -> np.ndarray:
        # TensorFlow checks the pattern before it looks at the rewrite.
        pattern_text = _scalar(pattern, "Pattern")
        compile_re2(pattern_text)
        replacer = make_replacer(pattern_text, _scalar(rewrite, "Rewrite"), replace_global)
        return _replace_all(replacer, x)

    return run


def _full_match(regex: Regex, x: np.ndarray) -> np.ndarray:
    match = regex.fullmatch
    hits = [match(s) for s in flat_strings(x)]
    return np.array(hits, dtype=bool).reshape(x.shape)


@kernel("StaticRegexFullMatch")
def static_regex_full_match(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    pattern = attr_bytes(node.attr("pattern"))
    try:
        regex = compile_re2(pattern, capture=False)
    except OpError as err:  # as TensorFlow, which fails to build the kernel on the first run
        return reject_when_run(err)
    return lambda x: _full_match(regex, x)


@kernel("RegexFullMatch")
def regex_full_match(node: NodeContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def run(x: np.ndarray, pattern: np.ndarray) -> np.ndarray:
        return _full_match(compile_re2(_scalar(pattern, "Pattern"), capture=False), x)

    return run
