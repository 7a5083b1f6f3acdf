"""``graphserve``: tensorflow_model_server's command line, plus ``graphserve inspect``.

Flags keep TensorFlow Serving's names, types and defaults, in its ``--name=value`` syntax (also
``--name value``; booleans as bare ``--flag`` or ``--flag=true|false``). Flags of features not
implemented yet are accepted with a warning, so existing command lines keep working. As in
tensorflow_model_server, a malformed value prints the usage and exits with status 255, while an
unknown argument prints the usage and carries on.

``graphserve inspect DIR [--tag_set serve] [--signature_def KEY]`` describes a SavedModel
(delegated to ``runtime.inspect``); ``graphserve predict|classify|regress|status|metadata|reload``
call a running server (delegated to ``serving.client.cli``).
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import warnings
from collections.abc import Sequence
from importlib import metadata
from typing import Any

from serving.config import ServerOptions
from serving.logs import FORMATS, LEVELS, configure

log = logging.getLogger("graphserve")

# Subcommands that call a running server (serving.client.cli); listed here so that telling them
# apart does not import the client.
CLIENT_SUBCOMMANDS = ("predict", "classify", "regress", "status", "metadata", "reload")

_BOOL_WORDS = {"true": True, "1": True, "false": False, "0": False}

# Flags that shape the server: name -> type (ServerOptions' fields, which hold the defaults).
_TYPES: dict[str, type] = {"int": int, "float": float, "str": str, "bool": bool}
_SERVED: dict[str, type] = {
    f.name: _TYPES[str(f.type)] for f in dataclasses.fields(ServerOptions)
}

# tensorflow_model_server flags accepted for compatibility that change nothing yet.
_ACCEPTED: dict[str, type] = {
    "flush_filesystem_caches": bool,
    # Unloads run on each model's own load worker (serving.core.load_lanes).
    "num_unload_threads": int,
    "tensorflow_session_config_file": str,
    "per_process_gpu_memory_fraction": float,
    "platform_config_file": str,
    "enable_profiler": bool,
    "enable_grpc_healthcheck_service": bool,
    "remove_unused_fields_from_bundle_metagraph": bool,
    "num_tflite_pools": int,
    "num_tflite_interpreters_per_pool": int,
    "xla_cpu_compilation_enabled": bool,
    "xla_gpu_compilation_enabled": bool,
    "thread_pool_factory_config_file": str,
    "mixed_precision": str,
    "skip_initialize_tpu": bool,
}
_ALL: dict[str, type] = {**_SERVED, **_ACCEPTED, "version": bool}
# Flags that take one of a few words.
_CHOICES: dict[str, tuple[str, ...]] = {"log_level": tuple(LEVELS), "log_format": FORMATS}


class FlagError(ValueError):
    pass


@dataclasses.dataclass
class ParsedFlags:
    values: dict[str, Any]
    unknown: list[str]


def _convert(name: str, kind: type, text: str) -> Any:
    try:
        if kind is bool:
            return _BOOL_WORDS[text.lower()]
        if name in _CHOICES:
            if text.lower() not in _CHOICES[name]:
                raise ValueError(text)
            return text.lower()
        return kind(text)
    except (KeyError, ValueError):
        raise FlagError(f"Illegal value for flag --{name}: {text!r}") from None


def parse_flags(argv: Sequence[str]) -> ParsedFlags:
    values: dict[str, Any] = {}
    unknown: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not arg.startswith("--") or arg == "--":
            unknown.append(arg)
            continue
        name, eq, text = arg[2:].partition("=")
        kind = _ALL.get(name)
        if kind is None:
            unknown.append(arg)
            continue
        if not eq:
            if kind is bool:
                values[name] = True
                continue
            if i >= len(args):
                raise FlagError(f"Flag --{name} needs a value")
            text = args[i]
            i += 1
        values[name] = _convert(name, kind, text)
    return ParsedFlags(values, unknown)


def usage() -> str:
    defaults = ServerOptions()
    lines = [
        "usage: graphserve [flags]",
        "       graphserve inspect DIR [--tag_set serve] [--signature_def KEY]",
        "       graphserve predict|classify|regress|status|metadata|reload --server HOST:PORT ...",
        "Flags:",
    ]
    for name, kind in _SERVED.items():
        value = getattr(defaults, name)
        shown = str(value).lower() if isinstance(value, bool) else value
        choices = f"\t{'|'.join(_CHOICES[name])}" if name in _CHOICES else ""
        lines.append(f"\t--{name}={shown}\t{kind.__name__}{choices}")
    lines.append("\t--version=false\tbool\tprint the version and exit")
    lines.append("Accepted for compatibility, no effect yet: "
                 + ", ".join(f"--{n}" for n in _ACCEPTED))
    return "\n".join(lines) + "\n"


def options_from_flags(values: dict[str, Any]) -> ServerOptions:
    served = {k: v for k, v in values.items() if k in _SERVED}
    for name in values:
        if name in _ACCEPTED:
            log.warning("--%s is accepted for compatibility and has no effect yet", name)
    return ServerOptions(**served)


def _version_text() -> str:
    try:
        version = metadata.version("graphserve")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return (f"TensorFlow ModelServer: graphserve {version}\n"
            f"TensorFlow Library: none (graphserve runtime {version})\n")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "inspect":
        from runtime.inspect import main as inspect_main

        return int(inspect_main(args[1:]) or 0)
    if args and args[0] in CLIENT_SUBCOMMANDS:
        from serving.client.cli import main as client_main

        return client_main(args)
    # watchdog warns when a directory tree appears faster than it registers watches; harmless.
    warnings.filterwarnings("ignore", message="Callback with id", category=RuntimeWarning)
    try:
        parsed = parse_flags(args)
    except FlagError as err:
        print(f"{err}\n{usage()}", end="")
        return 255
    if parsed.values.get("version"):
        print(_version_text(), end="")
        return 0
    if parsed.unknown:
        print(f"unknown argument: {parsed.unknown[0]}\n{usage()}", end="")
    from serving.workers.role import WorkerRole

    role = WorkerRole.from_env()
    # Before anything logs (options_from_flags warns about flags without effect).
    defaults = ServerOptions()
    configure(
        parsed.values.get("log_level", defaults.log_level),
        parsed.values.get("log_format", defaults.log_format),
        worker=role.index if role is not None else None,
    )
    options = options_from_flags(parsed.values)
    if options.workers > 1 and role is None:
        # The supervisor serves nothing: it never imports the server, so it stays small.
        from serving.workers.supervisor import supervise

        return supervise(options)
    from serving.server import serve

    return serve(options)


if __name__ == "__main__":
    sys.exit(main())
