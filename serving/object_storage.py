"""Model base paths on object storage: ``s3://``, ``gs://`` (and ``az://``) through fsspec.

TensorFlow Serving reads such paths through TensorFlow's file systems, configured by environment
variables; the same variables configure the clients here (``storage_options`` is the pure
mapping): ``S3_ENDPOINT`` (host[:port], or a URL), ``S3_USE_HTTPS``, ``S3_VERIFY_SSL``,
``AWS_REGION`` and ``AWS_ENDPOINT_URL`` for S3 (credentials: the usual AWS variables, read by
the client itself); ``STORAGE_EMULATOR_HOST`` and ``GOOGLE_APPLICATION_CREDENTIALS`` for GCS.
The clients are optional extras (``pip install graphserve[s3]``, ``[gcs]``, ``[azure]``).

Credentials never reach logs or errors: ``redact`` takes every credential variable's value out
of a message before it is shown.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from runtime.errors import UnimplementedError

# scheme -> (fsspec protocol, the package that implements it, the extra that installs it)
_SCHEMES: dict[str, tuple[str, str, str]] = {
    "s3": ("s3", "s3fs", "s3"),
    "gs": ("gcs", "gcsfs", "gcs"),
    "gcs": ("gcs", "gcsfs", "gcs"),
    "az": ("abfs", "adlfs", "azure"),
    "abfs": ("abfs", "adlfs", "azure"),
}
_CREDENTIAL_VARIABLES = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_KEY", "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_SAS_TOKEN",
)
_FALSE = ("0", "false", "no")


def scheme_of(path: str) -> str | None:
    """The object-storage scheme ``path`` names (``s3``, ``gs``, ...), or None for a local
    path."""
    head, sep, _ = path.partition("://")
    return head.lower() if sep and head.lower() in _SCHEMES else None


def storage_options(scheme: str, env: Mapping[str, str]) -> dict[str, Any]:
    """fsspec options for ``scheme`` from TensorFlow Serving's environment variables."""
    if scheme == "s3":
        options: dict[str, Any] = {}
        client: dict[str, Any] = {}
        endpoint = env.get("AWS_ENDPOINT_URL") or env.get("S3_ENDPOINT")
        if endpoint:
            if "://" not in endpoint:
                secure = env.get("S3_USE_HTTPS", "1").lower() not in _FALSE
                endpoint = f"{'https' if secure else 'http'}://{endpoint}"
            options["endpoint_url"] = endpoint
        if env.get("S3_VERIFY_SSL", "1").lower() in _FALSE:
            client["verify"] = False
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        if region:
            client["region_name"] = region
        if client:
            options["client_kwargs"] = client
        return options
    if scheme in ("gs", "gcs"):
        emulator = env.get("STORAGE_EMULATOR_HOST")
        if emulator:
            if "://" not in emulator:
                emulator = f"http://{emulator}"
            return {"endpoint_url": emulator, "token": "anon"}
        credentials = env.get("GOOGLE_APPLICATION_CREDENTIALS")
        return {"token": credentials} if credentials else {}
    return {}


def open_filesystem(url: str) -> Any:
    """The fsspec file system for ``url``; UnimplementedError naming the extra to install when
    its client is missing."""
    scheme = scheme_of(url)
    if scheme is None:
        raise ValueError(f"not an object-storage URL: {url}")
    protocol, package, extra = _SCHEMES[scheme]
    try:
        import fsspec

        options = storage_options(scheme, os.environ)
        if protocol == "gcs" and "STORAGE_EMULATOR_HOST" in os.environ:
            # gcsfs's default class first asks the storage-control gRPC API for the bucket's
            # layout, which emulators do not serve (it retries for minutes); the JSON API alone
            # is what an emulator has.
            from gcsfs.core import GCSFileSystem  # type: ignore[import-untyped]

            return GCSFileSystem(**options)
        return fsspec.filesystem(protocol, **options)
    except ImportError:
        raise UnimplementedError(
            f"Model base path {url} needs the {package} package: pip install graphserve[{extra}]"
        ) from None


def redact(message: str, env: Mapping[str, str] | None = None) -> str:
    """``message`` without the value of any credential variable."""
    env = os.environ if env is None else env
    for name in _CREDENTIAL_VARIABLES:
        value = env.get(name)
        if value and len(value) >= 4:
            message = message.replace(value, "<redacted>")
    return message
