"""The regex kernels on RE2: patterns that make a backtracking engine take exponential time
finish, with TensorFlow's answers (the short forms of these cases are recorded from TensorFlow in
cases_string_ops.py; here the inputs are long enough that backtracking would never finish)."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from runtime.kernels.registry import instantiate
from runtime.kernels.string_regex import compile_re2, global_replace, parse_rewrite, rune_length
from tests.runtime.kernels.check import run_bounded

# Run in a child process (run_bounded): a backtracking engine holds the GIL, so only a process
# boundary can bound the wait. The bound is generous; RE2 answers in milliseconds.
PATHOLOGICAL = textwrap.dedent(
    """
    import json
    import numpy as np
    from runtime.kernels.registry import instantiate

    def strings(*items):
        out = np.empty(len(items), dtype=object)
        out[:] = items
        return out

    def scalar(value):
        return np.array(value, dtype=object)

    a, x = b"a" * 5000 + b"!", b"x" * 5000
    inputs = strings(a, x, b"a" * 5000)
    static = instantiate("StaticRegexFullMatch", {"pattern": "(a+)+$"})(inputs)
    dynamic = instantiate("RegexFullMatch", {})(inputs, scalar(b"(x+x+)+y"))
    replace = instantiate("StaticRegexReplace", {"pattern": "(a|aa)+$", "rewrite": "#"})(inputs)
    dynamic_replace = instantiate("RegexReplace", {"replace_global": True})(
        inputs, scalar(b"(x+x+)+y"), scalar(b"<\\\\1>")
    )
    print(json.dumps({
        "static": static.tolist(),
        "dynamic": dynamic.tolist(),
        "replace": [len(s) for s in replace.tolist()],
        "replace_tail": [s[-2:].decode() for s in replace.tolist()],
        "dynamic_replace_same": [s == t for s, t in zip(dynamic_replace.tolist(), inputs.tolist())],
    }))
    """
)


def test_pathological_patterns_finish_with_tensorflows_answers() -> None:
    out = run_bounded(PATHOLOGICAL, "a pathological pattern (the regex engine backtracks)")
    result = json.loads(out)
    assert result["static"] == [False, False, True]
    assert result["dynamic"] == [False, False, False]
    # (a|aa)+$ matches the a's at the end only: none before "!", all 5000 of the last string.
    assert result["replace"] == [5001, 5000, 1]
    assert result["replace_tail"] == ["a!", "xx", "#"]
    assert result["dynamic_replace_same"] == [True, True, True]


@pytest.mark.parametrize(
    "text, pos, step",
    [
        (b"", 0, 1),
        (b"a", 0, 1),
        (b"\xc3\xa9", 0, 2),
        (b"\xe6\x97\xa5", 0, 3),
        (b"\xf0\x9f\x98\x80", 0, 4),
        (b"\xed\xa0\x80", 0, 3),  # a surrogate: RE2's decoder takes it as one character
        (b"\xc0\x80", 0, 1),  # over-long
        (b"\xf4\x90\x80\x80", 0, 1),  # past U+10FFFF
        (b"\xe6\x97", 0, 1),  # cut short
        (b"\x80\x80", 0, 1),  # a continuation byte
        (b"\xff", 0, 1),
        (b"a\xc3\xa9", 1, 2),
    ],
)
def test_refused_empty_matches_step_one_character_as_re2_reads_it(
    text: bytes, pos: int, step: int
) -> None:
    assert rune_length(text, pos) == step


def test_global_replace_refuses_an_empty_match_where_the_last_one_ended() -> None:
    # Python's re.sub gives "-b--c-" here; RE2 skips the empty match right after "a*" took "aa".
    rewrite = parse_rewrite(b"-")
    assert global_replace(compile_re2(b"a*"), rewrite, b"baac") == b"-b-c-"


def test_compiled_patterns_are_cached() -> None:
    assert compile_re2(b"(x+x+)+y") is compile_re2(b"(x+x+)+y")
    fn = instantiate("RegexFullMatch", {})
    pattern = np.array(b"[a-c]+", dtype=object)
    first = fn(np.array([b"abc", b"abd"], dtype=object), pattern)
    assert first.tolist() == [True, False]
    assert compile_re2.cache_info().currsize > 0
