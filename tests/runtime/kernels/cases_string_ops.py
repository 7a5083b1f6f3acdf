"""Kernel cases for string_ops, recorded via tf.raw_ops (fixtures/record_kernel_cases.py).

String tensors are object arrays of bytes. Inputs cover empty strings, non-ASCII and invalid
UTF-8, empty tensors, broadcasting and the errors TensorFlow raises.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.runtime.kernels.case import Case, rng

R = rng(11)


def S(*items: Any, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """An object array of bytes (str items are UTF-8 encoded)."""
    values = [v.encode() if isinstance(v, str) else v for v in items]
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape) if shape is not None else out


def scalar(value: str | bytes) -> np.ndarray:
    return np.array(value.encode() if isinstance(value, str) else value, dtype=object)


def random_strings(count: int, max_len: int, seed: int) -> np.ndarray:
    gen = np.random.default_rng(seed)
    lengths = gen.integers(0, max_len + 1, size=count)
    return S(*[bytes(gen.integers(0, 256, size=n, dtype=np.uint8)) for n in lengths])


WORDS = S("the", "quick", "", "Brown", "fox!", "café", "naïve", "日本語", "x" * 17, "y" * 40)
NASTY = S(b"\xff\xfe", b"a\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf0\x9f\x98\x80", b"ab\x00cd")
EMPTY = S()

CASES: list[Case] = []


def add(
    name: str,
    op: str,
    inputs: dict[str, Any],
    attrs: dict[str, Any] | None = None,
    node_attrs: dict[str, Any] | None = None,
    expect_error: bool = False,
) -> None:
    CASES.append(Case(name, op, inputs, attrs or {}, node_attrs or {}, expect_error=expect_error))


# --- hashing -------------------------------------------------------------------------------------

# Every length class of farmhash (0, 1-3, 4-7, 8-16, 17-32, 33-64, 65+ with 1..4 blocks).
HASH_INPUT = random_strings(300, 300, seed=1)
LENGTHS = S(*[bytes(range(7, 7 + n % 250)) * (1 + n // 250) for n in range(270)])
for name, strings in (
    ("random", HASH_INPUT),
    ("lengths", LENGTHS),
    ("words", WORDS),
    ("nasty", NASTY),
    ("matrix", WORDS[:6].reshape(2, 3)),
    ("empty", EMPTY),
    ("scalar", scalar("hello")),
):
    for buckets in (1, 10, 1000003, 2**63 - 1):
        add(
            f"fast_{name}_{buckets}",
            "StringToHashBucketFast",
            {"input": strings},
            {"num_buckets": buckets},
        )
    add(
        f"legacy_{name}",
        "StringToHashBucket",
        {"string_tensor": strings},
        {"num_buckets": 2**63 - 1},
    )
    add(
        f"strong_{name}",
        "StringToHashBucketStrong",
        {"input": strings},
        {"num_buckets": 2**63 - 1, "key": [0xDECAFCAFFE, -17]},
    )
# A small batch takes the per-string path, a large one the vectorised path.
add(
    "fast_small_batch",
    "StringToHashBucketFast",
    {"input": HASH_INPUT[:5]},
    {"num_buckets": 2**63 - 1},
)
add("strong_key0", "StringToHashBucketStrong", {"input": WORDS}, {"num_buckets": 7, "key": [0, 0]})
add(
    "strong_bad_key",
    "StringToHashBucketStrong",
    {"input": WORDS},
    {"num_buckets": 7, "key": [1]},
    expect_error=True,
)

for name, data in (
    ("strings_1d", WORDS),
    ("strings_2d", WORDS[:6].reshape(3, 2)),
    ("strings_3d", S(*("abcdefgh" * 3), shape=(2, 3, 4))),
    ("int32", np.arange(12, dtype=np.int32).reshape(3, 4)),
    ("float64", R.normal(size=(4, 3))),
    ("bool", np.array([[True, False], [False, False]])),
    ("uint8_1d", np.arange(5, dtype=np.uint8)),
    ("rows0", np.zeros((0, 3), np.float32)),
):
    add(
        f"fingerprint_{name}",
        "Fingerprint",
        {"data": data, "method": scalar("farmhash64")},
        node_attrs={"T": data.dtype.type if data.dtype != object else np.bytes_},
    )
add(
    "fingerprint_bad_method",
    "Fingerprint",
    {"data": WORDS, "method": scalar("md5")},
    node_attrs={"T": np.bytes_},
    expect_error=True,
)
add(
    "fingerprint_scalar",
    "Fingerprint",
    {"data": scalar("x"), "method": scalar("farmhash64")},
    node_attrs={"T": np.bytes_},
    expect_error=True,
)

# --- case, strip, length -------------------------------------------------------------------------

CASE_INPUT = S(
    "ABC def",
    "ÀÉÎõü",
    "ΟΔΟΣ ΣΑΣ",
    "İstanbul",
    "Straße",
    "ǅ",
    "ﬃ",
    "",
    "MiXeD 123 !?",
    b"\xff\xfeAB",
    b"x\xc3",
    b"\xe2\x82Z",
    b"\xed\xa0\x80q",
    b"a\x00B",
)
for op in ("StringLower", "StringUpper"):
    for encoding in ("", "utf-8"):
        add(f"{op}_{encoding or 'ascii'}", op, {"input": CASE_INPUT}, {"encoding": encoding})
    add(f"{op}_matrix", op, {"input": CASE_INPUT[:6].reshape(2, 3)}, {"encoding": "utf-8"})
    add(f"{op}_empty", op, {"input": EMPTY}, {"encoding": "utf-8"})
    add(f"{op}_bad_encoding", op, {"input": CASE_INPUT}, {"encoding": "latin1"}, expect_error=True)

add(
    "strip",
    "StringStrip",
    {"input": S("  a b  ", "\t\n\v\f\rx\r\n", "", "   ", "\u00a0y\u00a0", "z", b"\x00 q \x00")},
)
add("strip_matrix", "StringStrip", {"input": S(" a", "b ", " c ", "d", shape=(2, 2))})

for unit in ("BYTE", "UTF8_CHAR"):
    add(f"length_{unit}", "StringLength", {"input": CASE_INPUT}, {"unit": unit})
    add(f"length_{unit}_nasty", "StringLength", {"input": NASTY}, {"unit": unit})
    add(f"length_{unit}_matrix", "StringLength", {"input": WORDS[:6].reshape(3, 2)}, {"unit": unit})
    add(f"length_{unit}_empty", "StringLength", {"input": EMPTY}, {"unit": unit})

# --- Substr --------------------------------------------------------------------------------------

SUB_INPUT = S("Hello", "", "日本語テキスト", "ab", "naïve café")


def substr(
    name: str,
    x: np.ndarray,
    pos: Any,
    length: Any,
    unit: str = "BYTE",
    dtype: type = np.int32,
    error: bool = False,
) -> None:
    add(
        f"substr_{name}_{unit}",
        "Substr",
        {"input": x, "pos": np.array(pos, dtype), "len": np.array(length, dtype)},
        {"unit": unit},
        {"T": dtype},
        expect_error=error,
    )


for unit in ("BYTE", "UTF8_CHAR"):
    substr("scalar", SUB_INPUT, 0, 2, unit)
    substr("scalar_int64", SUB_INPUT, 0, 3, unit, dtype=np.int64)
    substr("zero_len", SUB_INPUT, 0, 0, unit)
    substr("long_len", SUB_INPUT, 0, 100, unit)
    substr("neg_len", S("Hello", "日本語"), 1, -1, unit)
    substr("neg_pos", S("Hello", "日本語テ", "abc"), -2, 1, unit)
    substr("neg_pos_long", S("Hello", "日本語テ"), -3, 10, unit)
    substr("neg_pos_neg_len", S("Hello world"), -2, -1, unit, error=unit == "UTF8_CHAR")
    substr("pos_at_end", S("abc", "日本"), [3, 2], [1, 1], unit)
    substr("elementwise", SUB_INPUT, [0, 0, 2, 1, 6], [3, 0, 2, 5, 4], unit)
    substr("elementwise_2d", SUB_INPUT[:4].reshape(2, 2), [[0, 0], [1, 0]], [[2, 2], [1, 1]], unit)
    substr("bcast_rows", S("abcdef", "日本語テキスト", shape=(2, 1)), [0, 1, 2], [1, 2, 3], unit)
    substr("bcast_1d_input", S("abcdef"), [0, 2, 4], [2, 2, 2], unit)
    substr(
        "bcast_2d_pos",
        S("abcd", "efgh", "ijkl"),
        [[0, 1, 2], [1, 2, 3]],
        [[1, 1, 1], [2, 2, 2]],
        unit,
    )
    substr("out_of_range", S("abc", "de"), 3, 1, unit, error=True)
    substr("neg_out_of_range", S("abc", "de"), -3, 1, unit, error=True)
    substr("bcast_out_of_range", S("abcdef", "x", shape=(2, 1)), [0, 3], [1, 1], unit, error=True)
    substr("empty_input", EMPTY, 0, 1, unit)
substr("bcast_3d", S("abcd", shape=(1, 1, 1)), [[[0, 1]]], [[[1, 1]]], error=True)
substr("shape_mismatch", SUB_INPUT, [0, 1], [1], error=True)
substr("empty_pos", SUB_INPUT, np.zeros(0, np.int32), np.zeros(0, np.int32), error=True)
substr("incompatible", SUB_INPUT, [0, 1], [1, 1], error=True)
substr("utf8_mid_char", S("日本語"), 1, 1)  # a byte slice through a multi-byte character
substr("invalid_utf8", S(b"\xff\xfeabc", b"\x80\x80x"), 1, 2, "UTF8_CHAR")

# --- split ---------------------------------------------------------------------------------------

SPLIT_INPUT = S(
    "hello world",
    "  a  b   c ",
    "",
    "   ",
    "one",
    "x\u00a0y",
    "a,,b,",
    "\tt\nu\x0bv",
    "<><>4<>5<><>6<>",
    "日本 語",
)
for sep in ("", " ", ",", "<>", "日"):
    for maxsplit in (-1, 0, 1, 2):
        add(
            f"split_v2_{sep.encode().hex() or 'ws'}_{maxsplit}",
            "StringSplitV2",
            {"input": SPLIT_INPUT, "sep": scalar(sep)},
            {"maxsplit": maxsplit},
        )
add(
    "split_v2_trailing_ws_maxsplit",
    "StringSplitV2",
    {"input": S("a ", "a b ", "a  ", " a"), "sep": scalar("")},
    {"maxsplit": 1},
)
add("split_v2_empty_input", "StringSplitV2", {"input": EMPTY, "sep": scalar("")})
add("split_v2_all_empty", "StringSplitV2", {"input": S("", "  "), "sep": scalar("")})
add(
    "split_v2_matrix",
    "StringSplitV2",
    {"input": S("a b", "c", shape=(1, 2)), "sep": scalar("")},
    expect_error=True,
)
add("split_v2_sep_vector", "StringSplitV2", {"input": S("a b"), "sep": S("")}, expect_error=True)
for delimiter in ("", " ", ",;", "<>"):
    for skip in (True, False):
        add(
            f"split_v1_{delimiter.encode().hex() or 'bytes'}_{skip}",
            "StringSplit",
            {"input": SPLIT_INPUT, "delimiter": scalar(delimiter)},
            {"skip_empty": skip},
        )

# --- join ----------------------------------------------------------------------------------------

add(
    "join_two",
    "StringJoin",
    {"inputs": [S("a", "b", ""), S("x", "", "z")]},
    {"separator": "-"},
    {"N": 2},
)
add(
    "join_scalar_bcast",
    "StringJoin",
    {"inputs": [S("a", "b"), scalar("+"), S("c", "d")]},
    {"separator": ""},
    {"N": 3},
)
add(
    "join_scalar_vectors",
    "StringJoin",
    {"inputs": [S("ab"), scalar("日")]},
    {"separator": ", "},
    {"N": 2},
)
add("join_one", "StringJoin", {"inputs": [S("a", "b", shape=(2, 1))]}, {"separator": "x"}, {"N": 1})
add(
    "join_matrix",
    "StringJoin",
    {"inputs": [S("a", "b", "c", "d", shape=(2, 2)), S("1", "2", "3", "4", shape=(2, 2))]},
    {"separator": "/"},
    {"N": 2},
)
add("join_empty", "StringJoin", {"inputs": [EMPTY, scalar("x")]}, {}, {"N": 2})
add(
    "join_mismatch",
    "StringJoin",
    {"inputs": [S("a", "b"), S("c")]},
    {},
    {"N": 2},
    expect_error=True,
)
add(
    "join_rank_mismatch",
    "StringJoin",
    {"inputs": [S("a", "b", shape=(1, 2)), S("c", "d")]},
    {},
    {"N": 2},
    expect_error=True,
)

RJ = S(*"abcdef", shape=(2, 3))
RJ3 = S(*"abcdefgh", shape=(2, 2, 2))
for name, x, axes, attrs in (
    ("01", RJ, [0, 1], {"keep_dims": True}),
    ("10", RJ, [1, 0], {"keep_dims": True}),
    ("last_sep", RJ, -1, {"separator": "-"}),
    ("first_keep", RJ, [0], {"keep_dims": True, "separator": "+"}),
    ("none", RJ, np.zeros(0, np.int32), {}),
    ("3d_02", RJ3, [0, 2], {"separator": ","}),
    ("3d_20", RJ3, [2, 0], {"separator": ","}),
    ("3d_all_keep", RJ3, [2, 1, 0], {"keep_dims": True}),
    ("zero_size", np.zeros((2, 0), object), [1], {}),
    ("duplicate", RJ, [0, 0], {}),
    ("out_of_range", RJ, [2], {}),
):
    add(
        f"reduce_join_{name}",
        "ReduceJoin",
        {"inputs": x, "reduction_indices": np.array(axes, np.int32)},
        attrs,
        expect_error=name in ("duplicate", "out_of_range"),
    )

# --- n-grams -------------------------------------------------------------------------------------

NG_DATA = S("a", "b", "c", "d", "e", "f", "g")
NG_SPLITS = np.array([0, 4, 4, 5, 7], np.int64)


def ngrams(
    name: str,
    widths: list[int],
    data: np.ndarray = NG_DATA,
    splits: np.ndarray = NG_SPLITS,
    error: bool = False,
    **kw: Any,
) -> None:
    attrs = {
        "separator": " ",
        "ngram_widths": widths,
        "left_pad": "",
        "right_pad": "",
        "pad_width": 0,
        "preserve_short_sequences": False,
    }
    attrs.update(kw)
    add(
        f"ngrams_{name}",
        "StringNGrams",
        {"data": data, "data_splits": splits},
        attrs,
        {"Tsplits": splits.dtype.type},
        expect_error=error,
    )


ngrams("unigrams_bigrams", [1, 2])
ngrams("trigrams", [3], separator="|")
ngrams("padded", [2, 3], left_pad="<s>", right_pad="</s>", pad_width=1)
ngrams("auto_pad", [3], left_pad="L", right_pad="R", pad_width=-1)
ngrams("wide_pad", [4], left_pad="L", right_pad="R", pad_width=5)
ngrams("preserve_short", [3, 4], preserve_short_sequences=True, pad_width=0)
ngrams(
    "preserve_short_padded",
    [5],
    preserve_short_sequences=True,
    pad_width=1,
    left_pad="L",
    right_pad="R",
)
ngrams("int32_splits", [2], splits=NG_SPLITS.astype(np.int32))
ngrams("empty_data", [2], data=EMPTY, splits=np.array([0, 0, 0], np.int64))
ngrams("no_splits", [2], splits=np.zeros(0, np.int64))
ngrams("zero_width", [0], error=True)
ngrams("bad_first_split", [2], splits=np.array([1, 7], np.int64), error=True)
ngrams("bad_last_split", [2], splits=np.array([0, 5], np.int64), error=True)
ngrams("decreasing_split", [2], splits=np.array([0, 5, 3, 7], np.int64), error=True)

# --- base64 --------------------------------------------------------------------------------------

B64_RAW = S(b"", b"\xff\xfe", b"abc", b"abcd", b"abcde", bytes(range(256)), "日本語")
for pad in (False, True):
    add(f"encode_base64_pad{pad}", "EncodeBase64", {"input": B64_RAW}, {"pad": pad})
add(
    "decode_base64",
    "DecodeBase64",
    {
        "input": S(
            "__4",
            "__4=",
            "YWJj",
            "",
            "YWJjZA",
            "YWJjZA==",
            "YWJjZGU",
            "YWJjZGU=",
            "YWJ=",
            "YR",
            "YWJjZB==",
        )
    },
)
for i, bad in enumerate([b"+/4=", b"Y", b"YW=j", b"YWJj\n", b"Y===", b"YQ=", b"YQ===", b"===="]):
    add(f"decode_base64_bad{i}", "DecodeBase64", {"input": S(bad)}, expect_error=True)

# --- numbers -------------------------------------------------------------------------------------

add(
    "to_number_float",
    "StringToNumber",
    {
        "string_tensor": S(
            " 1.5 ",
            "1e3",
            "inf",
            "-Inf",
            "nan",
            "NaN",
            "+2",
            ".5",
            "5.",
            "1e400",
            "-1e-400",
            "0x10",
            "infinity",
            "-0",
            "\t7\n",
            "1e-40",
            "3.4028236e38",
            "0x1.8p1",
        )
    },
    {"out_type": np.float32},
)
add(
    "to_number_double",
    "StringToNumber",
    {"string_tensor": S("0.1", "1e-320", "123456789012345678", "-2.5e-3")},
    {"out_type": np.float64},
)
add(
    "to_number_int32",
    "StringToNumber",
    {"string_tensor": S("12", " 12 ", "+12", "-0", "007", "2147483647", "-2147483648")},
    {"out_type": np.int32},
)
add(
    "to_number_int64",
    "StringToNumber",
    {"string_tensor": S("9223372036854775807", "-9223372036854775808", "42", shape=(3, 1))},
    {"out_type": np.int64},
)
for i, bad in enumerate(["", "abc", "1,000", "1.5f", "1 2", "1_0", "١", "0x"]):
    add(
        f"to_number_float_bad{i}",
        "StringToNumber",
        {"string_tensor": S(bad)},
        {"out_type": np.float32},
        expect_error=True,
    )
for i, bad in enumerate(["1.0", "2147483648", "0x10", "1e3", "", "1_0"]):
    add(
        f"to_number_int_bad{i}",
        "StringToNumber",
        {"string_tensor": S(bad)},
        {"out_type": np.int32},
        expect_error=True,
    )

# --- AsString ------------------------------------------------------------------------------------

FLOATS = np.array(
    [
        0.1,
        1e10,
        -2.5,
        np.nan,
        -np.inf,
        np.inf,
        1e-7,
        123456789.123,
        -0.0,
        0.5,
        1.5,
        2.5,
        1e300,
        5e-324,
        1e-310,
        1 / 3,
    ],
    np.float64,
)
FORMATS = [
    {},
    {"precision": 3},
    {"precision": 0},
    {"precision": 20},
    {"scientific": True},
    {"shortest": True},
    {"width": 12, "fill": "0"},
    {"width": 12},
    {"width": 12, "fill": "-"},
    {"width": 3, "fill": " "},
    {"precision": 2, "shortest": True},
    {"width": 9, "fill": "+"},
    {"width": 9, "fill": "#", "shortest": True},
    {"width": 0, "fill": "0"},
    {"precision": 0, "scientific": True},
    {"precision": 5, "shortest": True, "width": 14},
]
with np.errstate(over="ignore", under="ignore"):  # 1e300 and 5e-324 do not fit a float32
    FLOATS32 = FLOATS.astype(np.float32)
for i, fmt in enumerate(FORMATS):
    for dtype, values in ((np.float32, FLOATS32), (np.float64, FLOATS)):
        add(f"as_string_{dtype.__name__}_{i}", "AsString", {"input": values}, fmt, {"T": dtype})
add(
    "as_string_float16",
    "AsString",
    {"input": np.array([0.1, 6e-8, -6e-8, 1e-5, 65504, np.nan], np.float16)},
    {"scientific": True},
    {"T": np.float16},
)
add(
    "as_string_float32_subnormal",
    "AsString",
    {"input": np.array([1e-45, -1e-45, 1e-39, 1.2e-38], np.float32)},
    {"scientific": True},
    {"T": np.float32},
)
add(
    "as_string_negative_nan",
    "AsString",
    {"input": np.array([-np.nan, np.nan, -np.nan], np.float64)},
    {"width": 7, "fill": "0"},
    {"T": np.float64},
)
INTS = np.array([0, 1, -5, 42, 127, -128], np.int64)
for dtype in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
    values = INTS.astype(dtype) if np.dtype(dtype).kind == "i" else np.abs(INTS).astype(dtype)
    for j, fmt in enumerate(
        [
            {},
            {"width": 5, "fill": "0"},
            {"width": 6, "fill": "-"},
            {"width": 4, "fill": "+"},
            {"width": 4, "fill": " "},
        ]
    ):
        add(f"as_string_{dtype.__name__}_{j}", "AsString", {"input": values}, fmt, {"T": dtype})
add(
    "as_string_uint64_large",
    "AsString",
    {"input": np.array([2**64 - 1, 2**63], np.uint64)},
    {"width": 22},
    {"T": np.uint64},
)
add(
    "as_string_int64_extremes",
    "AsString",
    {"input": np.array([2**63 - 1, -(2**63)], np.int64)},
    {},
    {"T": np.int64},
)
add(
    "as_string_bool",
    "AsString",
    {"input": np.array([[True, False]])},
    {"width": 7},
    {"T": np.bool_},
)
add(
    "as_string_complex64",
    "AsString",
    {"input": np.array([1 + 2j, complex(np.nan, -np.inf), -0.5j], np.complex64)},
    {"precision": 1, "width": 6, "fill": "0"},
    {"T": np.complex64},
)
add(
    "as_string_complex128",
    "AsString",
    {"input": np.array([1 / 3 + 2j], np.complex128)},
    {"shortest": True},
    {"T": np.complex128},
)
add("as_string_string", "AsString", {"input": S("a", "bcdefg", "")}, {"width": 5}, {"T": np.bytes_})
add(
    "as_string_string_left",
    "AsString",
    {"input": S("a", "bcdefg")},
    {"width": 5, "fill": "-"},
    {"T": np.bytes_},
)
add(
    "as_string_matrix",
    "AsString",
    {"input": np.arange(6, dtype=np.int32).reshape(2, 3)},
    {},
    {"T": np.int32},
)
add("as_string_empty", "AsString", {"input": np.zeros((2, 0), np.float32)}, {}, {"T": np.float32})
add(
    "as_string_one",
    "AsString",
    {"input": np.array([3.25], np.float32)},
    {"precision": 1},
    {"T": np.float32},
)
for name, dtype, fmt in (
    ("int_precision", np.int32, {"precision": 2}),
    ("int_scientific", np.int32, {"scientific": True}),
    ("both_notations", np.float32, {"scientific": True, "shortest": True}),
    ("long_fill", np.float32, {"fill": "00", "width": 3}),
    ("bad_fill", np.float32, {"fill": "x", "width": 8}),
    ("bool_precision", np.bool_, {"precision": 3}),
):
    add(
        f"as_string_error_{name}",
        "AsString",
        {"input": np.zeros(2, dtype)},
        fmt,
        {"T": dtype},
        expect_error=True,
    )

# --- regular expressions -------------------------------------------------------------------------

KERAS_PUNCTUATION = r"""[!"#$%&()\*\+,-\./:;<=>?@\[\\\]^_`{|}~\']"""
RX_INPUT = S(
    "Hello, World!",
    "it's a test.",
    "",
    "café—naïve?",
    "a\nb\n",
    "x" * 30,
    "ÉéA",
    "aé1_ b",
    b"a\xffb\xc3",
    "日本語です",
    "abxd",
    "a.b.c",
    "\ta\x0bb\x0cc ",
)
REPLACE = [
    ("keras", KERAS_PUNCTUATION, "", True),
    ("first_only", r"[aeiou]", "_", False),
    ("groups", r"(\w)(\w)", r"\2\1", True),
    ("group0", r"[ao]", r"<\0>", True),
    ("escaped_backslash", r"a", r"\\", True),
    ("missing_group", r"(b)", r"<\2>", True),
    ("bad_rewrite_escape", r"b", r"<\n>", True),
    ("bad_rewrite_escape_first", r"b", r"<\n>", False),
    ("empty_matches", r"x*", "-", True),
    ("empty_alternative", r"|a", "X", True),
    ("empty_or_b", r"x*|b", "-", True),
    ("word_boundary", r"\b", "|", True),
    ("word", r"\w+", "W", True),
    ("not_word", r"\W", "#", True),
    ("digit_space", r"\d|\s", "~", True),
    ("dot", r".", "X", True),
    ("dot_star", r"a.*", "Z", True),
    ("dollar", r"b$", "X", True),
    ("dollar_multiline", r"(?m)b$", "X", True),
    ("anchors", r"^.|\z", "|", True),
    ("case_insensitive", r"(?i)é|a", "X", True),
    ("inline_flag_mid", r"x(?i)A|B", "#", True),
    ("unicode_letter", r"\pL+", "L", True),
    ("unicode_braces", r"\p{Lu}", "U", True),
    ("unicode_negated", r"\PL", ".", True),
    ("unicode_in_class", r"[\p{N}\s]", "_", True),
    ("posix", r"[[:alpha:]]+", "A", True),
    ("posix_punct", r"[[:punct:]]", "", True),
    ("negated_class", r"[^a-z]", "", True),
    ("octal_hex", r"\141|\x{62}|\x63", "-", True),
    ("quoted", r"\Q.b.\E", "!", True),
    ("lazy", r"a.*?b", "<>", True),
    ("named_group", r"(?P<first>a)(?P<second>b)?", r"[\1\2]", True),
    ("brace_literal", r"a{,2}", "!", True),
    ("repeat", r"x{2,3}", "!", True),
    ("non_ascii_literal", r"é+|語", "*", True),
    ("dash_in_class", r"[+--]", "^", True),
    ("brace_not_repeat", r"a{x}|{", "!", True),
    ("dotall", r"(?s)a.b", "!", True),
    ("scoped_flag", r"a(?i:B)|(?i)A(?-i)b", "!", True),
    ("negated_unicode_in_class", r"[\P{L}]+", "_", True),
    ("caret_negated_unicode", r"\p{^L}", "_", True),
    ("negated_class_unicode", r"[^\pL\s]", "", True),
    ("class_with_escapes", r"[\d\-\]x]", "#", True),
    ("quote_to_end", r"\Q.*", "!", True),
    ("max_repeat", r"x{2,1000}", "!", True),
]
for name, pattern, rewrite, glob in REPLACE:
    add(
        f"static_replace_{name}",
        "StaticRegexReplace",
        {"input": RX_INPUT},
        {"pattern": pattern, "rewrite": rewrite, "replace_global": glob},
    )
add(
    "static_replace_matrix",
    "StaticRegexReplace",
    {"input": RX_INPUT[:4].reshape(2, 2)},
    {"pattern": "[lo]", "rewrite": "0"},
)
add(
    "static_replace_empty", "StaticRegexReplace", {"input": EMPTY}, {"pattern": "a", "rewrite": "b"}
)
for name, pattern in (
    ("unclosed", "(a"),
    ("backref", r"(a)\1"),
    ("lookahead", "a(?=b)"),
    ("lookbehind", "(?<=a)b"),
    ("unmatched", "a)"),
    ("bad_class", "[a"),
    ("trailing_backslash", "a\\"),
    ("bad_escape", r"\y"),
    ("bad_repeat", "a**"),
    ("angle_named_group", "(?<x>a)"),
    ("nothing_to_repeat", "*a"),
    ("huge_repeat", "a{1001}"),
    ("bad_lazy", "a*??"),
    ("negative_lookahead", "a(?!b)"),
):
    add(
        f"static_replace_invalid_{name}",
        "StaticRegexReplace",
        {"input": RX_INPUT},
        {"pattern": pattern, "rewrite": ""},
        expect_error=True,
    )

add(
    "regex_replace",
    "RegexReplace",
    {"input": RX_INPUT, "pattern": scalar(r"(\w+)"), "rewrite": scalar(r"<\1>")},
)
add(
    "regex_replace_first",
    "RegexReplace",
    {"input": RX_INPUT, "pattern": scalar("[a-z]"), "rewrite": scalar("#")},
    {"replace_global": False},
)
add(
    "regex_replace_pattern_vector",
    "RegexReplace",
    {"input": RX_INPUT, "pattern": S("a"), "rewrite": scalar("#")},
    expect_error=True,
)
add(
    "regex_replace_invalid",
    "RegexReplace",
    {"input": RX_INPUT, "pattern": scalar("(a"), "rewrite": scalar("#")},
    expect_error=True,
)

FULL = [
    ("dot_c", "a.c|"),
    ("letters", r"[a-z]+"),
    ("any", ".*"),
    ("unicode", r"\pL+"),
    ("ci", "(?i)hello, world!"),
    ("dollar", "a\nb$"),
    ("digits", r"\d*"),
    ("non_ascii", "日本語.*"),
]
FULL_INPUT = S(
    "abc",
    "ab",
    "",
    "hello",
    "Hello, World!",
    "a\nb\n",
    "a\nb",
    "123",
    "日本語です",
    b"\xff",
    "日本",
)
for name, pattern in FULL:
    add(
        f"static_full_match_{name}",
        "StaticRegexFullMatch",
        {"input": FULL_INPUT},
        {"pattern": pattern},
    )
add(
    "static_full_match_matrix",
    "StaticRegexFullMatch",
    {"input": FULL_INPUT[:4].reshape(2, 2)},
    {"pattern": "a.*"},
)
add(
    "static_full_match_invalid",
    "StaticRegexFullMatch",
    {"input": FULL_INPUT},
    {"pattern": "a("},
    expect_error=True,
)
add("full_match", "RegexFullMatch", {"input": FULL_INPUT, "pattern": scalar("a.*")})
add(
    "full_match_invalid",
    "RegexFullMatch",
    {"input": FULL_INPUT, "pattern": scalar("a(")},
    expect_error=True,
)

# Patterns a backtracking engine needs exponential time for (RE2 is linear), RE2 features Python's
# `re` lacks, empty matches stepping over every kind of UTF-8 sequence, and "(?<" in the places an
# RE2 that predates (?<name>...) does or does not read it as a group.
RX_HARD_INPUT = S(
    "a" * 26 + "!",
    "a" * 26,
    "x" * 30 + "z",
    "x" * 30 + "y",
    "αβγ abc Ωmega",
    "aaab",
    *NASTY.tolist(),
    b"\xc0\x80",
    b"\xf4\x90\x80\x80",
    b"\xef\xbf\xbd",
    "(?<x>a)",
)
HARD_REPLACE = [
    ("nested_plus", "(a+)+$", "#", True),
    ("nested_plus_group", "(a+)+$", r"<\1>", True),
    ("nested_xx", "(x+x+)+y", "#", True),
    ("alternation_blowup", "(a|aa)+$", "#", True),
    ("greek", r"\p{Greek}+", "G", True),
    ("ungreedy", "(?U)a+", "A", True),
    ("any_byte", r"a\Cb|\C", "!", True),
    ("negated_posix", "[[:^alpha:]]", "_", True),
    ("not_digit_in_class", r"[\Dx]", ".", False),
    ("empty_everywhere", "", "-", True),
    ("empty_first", "", "-", False),
    ("angle_in_class", "[(?<]", "!", True),
    ("escaped_angle", r"\(?<", "!", True),
    ("quoted_angle", r"\Q(?<\E", "!", True),
]
for name, pattern, rewrite, glob in HARD_REPLACE:
    add(
        f"static_replace_{name}",
        "StaticRegexReplace",
        {"input": RX_HARD_INPUT},
        {"pattern": pattern, "rewrite": rewrite, "replace_global": glob},
    )
for name, pattern in (
    ("angle_named_group_nested", "((?<x>a)"),
    ("lookbehind_at_end", "a(?<="),
    ("negative_lookbehind", "(?<!a)b"),
    ("error_before_angle", "a**(?<x>b)"),
    ("angle_after_class", "[a](?<x>b)"),
):
    add(
        f"static_replace_invalid_{name}",
        "StaticRegexReplace",
        {"input": RX_HARD_INPUT},
        {"pattern": pattern, "rewrite": ""},
        expect_error=True,
    )
for name, pattern in (
    ("nested_plus", "(a+)+$"),
    ("nested_xx", "(x+x+)+y"),
    ("greek", r"[\p{Greek}\s\pL]+"),
):
    add(
        f"static_full_match_{name}",
        "StaticRegexFullMatch",
        {"input": RX_HARD_INPUT},
        {"pattern": pattern},
    )
add(
    "full_match_nested_plus",
    "RegexFullMatch",
    {"input": RX_HARD_INPUT, "pattern": scalar("(a+)+$")},
)
add(
    "full_match_invalid_angle_group",
    "RegexFullMatch",
    {"input": RX_HARD_INPUT, "pattern": scalar("(?<x>a)")},
    expect_error=True,
)
add(
    "regex_replace_nested_plus",
    "RegexReplace",
    {"input": RX_HARD_INPUT, "pattern": scalar("(x+x+)+y"), "rewrite": scalar(r"[\1]")},
)

# --- Unicode code points -------------------------------------------------------------------------

UNICODE_INPUT = S(
    "héllo",
    "",
    "日本語",
    "\U0001f600x",
    "a\tb\x01",
    *NASTY.tolist(),
    b"\xc0\x80",
    b"\xf4\x90\x80\x80",
    b"\xe0\x80\xaf",
    b"ok\xf0\x9f",
)
for op in ("UnicodeDecode", "UnicodeDecodeWithOffsets"):
    for policy in ("replace", "ignore", "strict"):
        add(
            f"{op}_{policy}",
            op,
            {"input": UNICODE_INPUT},
            {"input_encoding": "UTF-8", "errors": policy},
            {},
            expect_error=policy == "strict",
        )
    add(
        f"{op}_valid_strict",
        op,
        {"input": S("héllo", "", "日本語\U0001f600")},
        {"input_encoding": "UTF-8", "errors": "strict"},
        {},
    )
    add(
        f"{op}_controls",
        op,
        {"input": UNICODE_INPUT},
        {
            "input_encoding": "UTF-8",
            "replace_control_characters": True,
            "replacement_char": 63,
            # int32 splits only for UnicodeDecode: TensorFlow's kernel with offsets crashes on them.
            **({"Tsplits": np.int32} if op == "UnicodeDecode" else {}),
        },
        {},
    )
    add(
        f"{op}_matrix",
        op,
        {"input": S("ab", "", "é", "日", shape=(2, 2))},
        {"input_encoding": "UTF-8"},
        {},
    )
    add(
        f"{op}_utf16",
        op,
        {"input": S("héllo\U0001f600".encode("utf-16-be"), b"\x00a\xd8\x00", b"\x00")},
        {"input_encoding": "UTF-16-BE"},
        {},
    )
    add(
        f"{op}_bad_policy",
        op,
        {"input": S("a")},
        {"input_encoding": "UTF-8", "errors": "loose"},
        {},
        expect_error=True,
    )

CODES = np.array(
    [104, 233, 0x65E5, 0x1F600, -1, 0x110000, 0xD800, 0xDE00, 0xD83D, 0xDE00, 97], np.int32
)
CODE_SPLITS = np.array([0, 2, 4, 6, 8, 10, 11], np.int64)
for encoding in ("UTF-8", "UTF-16-BE", "UTF-32-BE"):
    for policy in ("replace", "ignore"):
        add(
            f"unicode_encode_{encoding}_{policy}",
            "UnicodeEncode",
            {"input_values": CODES, "input_splits": CODE_SPLITS},
            {"output_encoding": encoding, "errors": policy},
            {},
        )
add(
    "unicode_encode_strict",
    "UnicodeEncode",
    {"input_values": CODES, "input_splits": CODE_SPLITS},
    {"output_encoding": "UTF-8", "errors": "strict"},
    {},
    expect_error=True,
)
add(
    "unicode_encode_valid_strict",
    "UnicodeEncode",
    {"input_values": CODES[:4], "input_splits": np.array([0, 1, 4], np.int32)},
    {"output_encoding": "UTF-8", "errors": "strict", "replacement_char": 42},
    {"Tsplits": np.int32},
)
add(
    "unicode_encode_empty",
    "UnicodeEncode",
    {"input_values": np.zeros(0, np.int32), "input_splits": np.array([0, 0], np.int64)},
    {"output_encoding": "UTF-8"},
    {},
)
add(
    "unicode_encode_bad_encoding",
    "UnicodeEncode",
    {"input_values": CODES, "input_splits": CODE_SPLITS},
    {"output_encoding": "latin1"},
    {},
    expect_error=True,
)
