"""``graphserve predict|classify|regress|status|metadata|reload``: the client from a shell.

    graphserve predict --server localhost:8500 --model half_plus_two --input x='[[1.0], [2.0]]'
    graphserve predict --rest --server localhost:8501 --model m --input x=@x.npy --output out.npz
    graphserve classify --server localhost:8500 --model m --signature s --example '{"x": 1.0}'
    graphserve status --server localhost:8500 --model half_plus_two
    graphserve reload --server localhost:8500 --config models.config

``--input NAME=VALUE`` takes ``@file.npy``, ``@file.json`` or a JSON literal; ``--input
@file.npz`` takes every array of the file under its own name. JSON literals are converted to the
dtype the signature declares (read from the model's metadata), so ``'[[1.0]]'`` feeds a float32
input as float32 over gRPC too. In JSON, ``{"b64": "..."}`` stands for bytes.

Answers are printed as JSON (bytes as text when they are UTF-8, else ``{"b64": ...}``);
``--output FILE.npz`` saves predict's outputs instead (string tensors as numpy bytes arrays, which
drop trailing NUL bytes). Exit status: 0 on success, 1 when the server (or the client) reports an
error, printed as ``CODE: message``, 2 for a malformed command line or unreadable input file.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf import text_format

from serving.client import ServingError, connect
from serving.client.base import DEFAULT_TIMEOUT_S
from serving.client.errors import InvalidArgumentError
from serving.client.grpc_messages import ModelServerConfig
from serving.client.results import numpy_dtype
from serving.config import ModelConfig

SUBCOMMANDS = ("predict", "classify", "regress", "status", "metadata", "reload")
GRPC_PORT, REST_PORT = 8500, 8501


class UsageError(Exception):
    """A command line or input file that cannot be used (exit status 2)."""


# -- reading inputs --------------------------------------------------------------------------


def _bytes_objects(value: Any) -> Any:
    """JSON with ``{"b64": ...}`` objects replaced by the bytes they encode."""
    if isinstance(value, dict):
        if set(value) == {"b64"} and isinstance(value["b64"], str):
            return base64.b64decode(value["b64"])
        return {k: _bytes_objects(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_bytes_objects(v) for v in value]
    return value


def _json(text: str, what: str) -> Any:
    try:
        return _bytes_objects(json.loads(text))
    except (ValueError, TypeError) as err:
        raise UsageError(f"{what} is not valid JSON: {err}") from err


def _read_text(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err}") from err


def _json_value(text: str, what: str) -> Any:
    """``@file.json`` or a JSON literal."""
    if text.startswith("@"):
        return _json(_read_text(text[1:]), text[1:])
    return _json(text, what)


def _load_numpy(path: str) -> Any:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise UsageError(f"cannot read {path}: {err}") from err


def parse_inputs(specs: Sequence[str]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``--input`` values -> (arrays from files, JSON literals still to be typed)."""
    arrays: dict[str, np.ndarray] = {}
    literals: dict[str, Any] = {}
    for spec in specs:
        if "=" not in spec:
            if spec.startswith("@") and spec.endswith(".npz"):
                with _load_numpy(spec[1:]) as data:
                    arrays.update({name: data[name] for name in data.files})
                continue
            raise UsageError(f"--input {spec}: expected NAME=VALUE or @FILE.npz")
        name, _, value = spec.partition("=")
        if value.startswith("@") and value.endswith(".npy"):
            arrays[name] = _load_numpy(value[1:])
        else:
            literals[name] = _json_value(value, f"--input {name}")
    return arrays, literals


def _typed(literals: dict[str, Any], metadata: dict[str, Any], signature: str) -> dict[str, Any]:
    found = metadata["signature_def"].get(signature)
    declared = found["inputs"] if found else {}
    out: dict[str, Any] = {}
    for name, value in literals.items():
        info = declared.get(name)
        if info is None:  # not in the signature: the server will say so
            out[name] = value
            continue
        try:
            dtype = numpy_dtype(info["dtype"])
        except ValueError:
            out[name] = value
            continue
        try:
            out[name] = np.array(value, dtype=dtype)
        except (TypeError, ValueError, OverflowError) as err:
            raise InvalidArgumentError(
                f"input {name}: {json.dumps(value)[:200]} is not {info['dtype']}: {err}"
            ) from err
    return out


def _examples(args: argparse.Namespace) -> list[Any]:
    examples: list[Any] = [_json_value(e, "--example") for e in args.example]
    for spec in args.examples:
        value = _json_value(spec, "--examples")
        if not isinstance(value, list):
            raise UsageError("--examples takes a JSON list of examples")
        examples.extend(value)
    if not examples:
        raise UsageError("give at least one --example or --examples")
    return examples


# -- writing answers -----------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """Arrays and bytes as JSON-ready values."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return _plain(value.tolist())
        if value.dtype.kind in "biu" or value.dtype == np.float64:
            return value.tolist()
        if value.dtype.kind == "c":  # JSON has no complex numbers
            return np.vectorize(str, otypes=[object])(value).tolist()
        # Narrower floats print in their own shortest form (0.1, not 0.10000000149011612).
        flat = [float(str(v)) for v in value.reshape(-1)]
        return np.array(flat, dtype=np.float64).reshape(value.shape).tolist()
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _print_object(obj: dict[str, Any]) -> None:
    """One key per line, each value on one line: readable for small tensors, still JSON."""
    lines = [f"  {json.dumps(k)}: {json.dumps(_plain(v))}" for k, v in obj.items()]
    print("{\n" + ",\n".join(lines) + "\n}" if lines else "{}")


def _savable(array: np.ndarray) -> np.ndarray:
    if array.dtype == object:  # np.save would pickle an object array
        return np.array(array.tolist(), dtype=bytes).reshape(array.shape)
    return array


def _save(path: str, outputs: dict[str, np.ndarray]) -> None:
    arrays: dict[str, Any] = {k: _savable(v) for k, v in outputs.items()}
    try:
        np.savez(path, **arrays)
    except OSError as err:
        raise UsageError(f"cannot write {path}: {err}") from err
    for alias, array in outputs.items():
        print(f"{alias}: {array.dtype} {list(array.shape)} -> {path}")


# -- subcommands ---------------------------------------------------------------------------


def _selection(args: argparse.Namespace) -> dict[str, Any]:
    return {"version": args.version, "label": args.label}


def _predict(client: Any, args: argparse.Namespace) -> None:
    arrays, literals = parse_inputs(args.input)
    inputs: dict[str, Any] = dict(arrays)
    if literals:
        metadata = client.get_model_metadata(args.model, **_selection(args), timeout=args.timeout)
        inputs.update(_typed(literals, metadata, args.signature or "serving_default"))
    outputs = client.predict(
        args.model,
        inputs,
        signature_name=args.signature,
        output_filter=args.output_filter or None,
        timeout=args.timeout,
        **_selection(args),
    )
    if args.output:
        _save(args.output, outputs)
    else:
        _print_object(outputs)


def _examples_call(method: str) -> Callable[[Any, argparse.Namespace], None]:
    def run(client: Any, args: argparse.Namespace) -> None:
        context = _json_value(args.context, "--context") if args.context else None
        results = getattr(client, method)(
            args.model,
            _examples(args),
            context,
            signature_name=args.signature,
            timeout=args.timeout,
            **_selection(args),
        )
        _print_object({"results": results})

    return run


def _status(client: Any, args: argparse.Namespace) -> None:
    statuses = client.get_model_status(args.model, **_selection(args), timeout=args.timeout)
    _print_object({"model_version_status": [dataclasses.asdict(s) for s in statuses]})


def _metadata(client: Any, args: argparse.Namespace) -> None:
    metadata = client.get_model_metadata(args.model, **_selection(args), timeout=args.timeout)
    print(json.dumps(metadata, indent=2))


def _reload(client: Any, args: argparse.Namespace) -> None:
    if args.config:
        config = ModelServerConfig()
        try:
            text_format.Parse(_read_text(args.config), config)
        except text_format.ParseError as err:
            raise UsageError(f"{args.config} is not a ModelServerConfig: {err}") from err
        client.reload_config(config, timeout=args.timeout)
    else:
        models = [ModelConfig(args.model_name, Path(args.model_base_path))]
        client.reload_config(models, timeout=args.timeout)
    print("reloaded")


_RUN: dict[str, Callable[[Any, argparse.Namespace], None]] = {
    "predict": _predict,
    "classify": _examples_call("classify"),
    "regress": _examples_call("regress"),
    "status": _status,
    "metadata": _metadata,
    "reload": _reload,
}


# -- command line --------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # raise instead of exiting the process
        raise UsageError(f"{self.format_usage()}{self.prog}: error: {message}")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="graphserve", description="Talk to a TensorFlow Serving API.", allow_abbrev=False
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    helps = {
        "predict": "run a signature on tensors",
        "classify": "classify tf.Examples",
        "regress": "regress tf.Examples",
        "status": "show the versions of a model and their states",
        "metadata": "show a model's signatures",
        "reload": "replace the served models (gRPC only)",
    }
    for name in SUBCOMMANDS:
        sub = commands.add_parser(name, help=helps[name], allow_abbrev=False)
        sub.add_argument(
            "--server",
            help=f"HOST:PORT (default localhost:{GRPC_PORT}, "
            f"or localhost:{REST_PORT} with --rest); a URL with --rest",
        )
        sub.add_argument("--rest", action="store_true", help="use the REST API instead of gRPC")
        sub.add_argument(
            "--timeout",
            type=float,
            default=DEFAULT_TIMEOUT_S,
            help="seconds per call (default %(default)s)",
        )
        if name == "reload":
            which = sub.add_mutually_exclusive_group(required=True)
            which.add_argument("--config", help="a text-format ModelServerConfig file")
            which.add_argument("--model_name", help="serve this one model (with --model_base_path)")
            sub.add_argument("--model_base_path", help="the model's directory on the server")
            continue
        sub.add_argument("--model", required=True)
        selection = sub.add_mutually_exclusive_group()
        selection.add_argument("--version", type=int)
        selection.add_argument("--label")
        if name in ("status", "metadata"):
            continue
        sub.add_argument("--signature", help="signature name (default serving_default)")
        if name == "predict":
            sub.add_argument(
                "--input",
                action="append",
                default=[],
                required=True,
                metavar="NAME=VALUE",
                help="@file.npy, @file.json or a JSON literal; or @file.npz",
            )
            sub.add_argument("--output_filter", action="append", default=[], metavar="ALIAS")
            sub.add_argument("--output", metavar="FILE.npz", help="save outputs here")
        else:
            sub.add_argument(
                "--example",
                action="append",
                default=[],
                metavar="JSON",
                help="one example: {feature: value or list}",
            )
            sub.add_argument(
                "--examples",
                action="append",
                default=[],
                metavar="JSON",
                help="a JSON list of examples, or @file.json",
            )
            sub.add_argument("--context", metavar="JSON", help="features common to all")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; ``argv`` starts with its name (``["predict", "--model", ...]``)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _parser().parse_args(args_list)
        if args.command == "reload":
            if args.rest:
                raise UsageError("reload needs gRPC: TensorFlow Serving's REST API cannot reload")
            if args.model_name and not args.model_base_path:
                raise UsageError("--model_name needs --model_base_path")
        server = args.server or f"localhost:{REST_PORT if args.rest else GRPC_PORT}"
        with connect(server, rest=args.rest, timeout=args.timeout) as client:
            _RUN[args.command](client, args)
    except UsageError as err:
        print(err, file=sys.stderr)
        return 2
    except ServingError as err:
        print(f"{err.code.name}: {err.message}", file=sys.stderr)
        return 1
    except SystemExit as exit_:  # --help
        return int(exit_.code or 0)
    return 0


__all__ = ["SUBCOMMANDS", "main", "parse_inputs"]
