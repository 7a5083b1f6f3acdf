"""A TensorFlow Serving client over its REST API (httpx), with numpy arrays in and out.

Requests use the columnar ``"inputs"`` format, strings as ``{"b64": ...}``. JSON answers carry no
dtypes, and a signature with a single output answers without its name, so the client reads the
signature's outputs (alias, dtype, shape) from the model's metadata: every output comes back with
the dtype the signature declares (float32 stays float32, strings are ``bytes`` objects). The
metadata is fetched once per (model, version or label) and kept; an answer that no longer fits it
(the model changed) fetches it again. ``forget_metadata()`` drops what is kept.

REST has no ``output_filter``: the client drops unwanted outputs itself, after the run. It has no
config reload either; ``reload_config`` raises UNIMPLEMENTED (use the gRPC client).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Self
from urllib.parse import quote

import httpx
import numpy as np
from google.protobuf import json_format

from runtime.errors import Code
from serving.client import examples as example_codec
from serving.client.base import DEFAULT_TIMEOUT_S, check_selection, check_timeout
from serving.client.errors import (
    DeadlineExceededError,
    InvalidArgumentError,
    UnavailableError,
    UnimplementedError,
    code_for_http_status,
    error_for,
)
from serving.client.examples import ExampleLike
from serving.client.results import SignatureDefMap, VersionStatus, metadata_dict, numpy_dtype
from serving.client.tensors import as_array, from_json, to_json

DEFAULT_SIGNATURE = "serving_default"
# alias -> (dtype, shape or None for unknown rank)
Outputs = dict[str, tuple[np.dtype, "list[int] | None"]]


def base_url(server: str) -> str:
    """``host:port`` or a full ``http(s)://`` URL."""
    server = server.rstrip("/")
    return server if "://" in server else f"http://{server}"


def _model_path(model: str, version: int | None, label: str | None) -> str:
    path = f"/v1/models/{quote(model, safe='')}"
    if version is not None:
        path += f"/versions/{version}"
    elif label is not None:
        path += f"/labels/{quote(label, safe='')}"
    return path


def _server_error(response: httpx.Response) -> Exception:
    status = response.status_code
    try:
        body = json.loads(response.content)
        message = body["error"]
        if not isinstance(message, str):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        message = f"HTTP {status}: {response.text[:500]}"
    return error_for(code_for_http_status(status), message, http_status=status)


def _filtered(outputs: dict[str, np.ndarray], wanted: Sequence[str]) -> dict[str, np.ndarray]:
    """TensorFlow Serving's output_filter checks, applied to the answer."""
    chosen: dict[str, np.ndarray] = {}
    for alias in wanted:
        if alias not in outputs:
            raise InvalidArgumentError(
                f"output tensor alias not found in signature: {alias} Outputs expected to be in "
                f"the set {{{','.join(sorted(outputs))}}}."
            )
        if alias in chosen:
            raise InvalidArgumentError(f"duplicate output tensor alias: {alias}")
        chosen[alias] = outputs[alias]
    return chosen


def _float32(value: Any) -> float:
    """Scores and regression values are float32 on the server; JSON prints them in their
    shortest form (2.05), gRPC carries the float32 itself (2.049999952316284). Rounding the JSON
    number to float32 gives the same Python float through both transports."""
    return float(np.float32(value))


class RestClient:
    """``RestClient("localhost:8501")``; ``client`` to bring a configured ``httpx.Client``."""

    def __init__(
        self,
        server: str = "localhost:8501",
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        client: httpx.Client | None = None,
    ) -> None:
        self.timeout = check_timeout(timeout, DEFAULT_TIMEOUT_S)
        self.http = client or httpx.Client(base_url=base_url(server))
        self._outputs: dict[tuple[str, int | None, str | None, str], Outputs] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def forget_metadata(self) -> None:
        with self._lock:
            self._outputs.clear()

    def _send(
        self, method: str, path: str, body: dict[str, Any] | None, timeout: float | None
    ) -> Any:
        seconds = check_timeout(timeout, self.timeout)
        content = None if body is None else json.dumps(body).encode("utf-8")
        headers = {} if body is None else {"Content-Type": "application/json"}
        try:
            response = self.http.request(
                method, path, content=content, headers=headers, timeout=seconds
            )
        except httpx.TimeoutException as err:
            raise DeadlineExceededError(
                f"no answer to {method} {path} within {seconds:g} s ({type(err).__name__})"
            ) from err
        except httpx.TransportError as err:
            raise UnavailableError(f"{method} {path}: {type(err).__name__}: {err}") from err
        if response.status_code != 200:
            raise _server_error(response)
        try:
            return json.loads(response.content)
        except ValueError as err:
            raise error_for(
                Code.INTERNAL, f"{method} {path} answered with invalid JSON: {err}"
            ) from err

    # -- predict ----------------------------------------------------------------------------

    def predict(
        self,
        model: str,
        inputs: Mapping[str, Any],
        *,
        version: int | None = None,
        label: str | None = None,
        signature_name: str | None = None,
        output_filter: Sequence[str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, np.ndarray]:
        """Outputs by alias, with the signature's dtypes (see the module docstring)."""
        check_selection(model, version, label)
        body: dict[str, Any] = {"inputs": {a: to_json(as_array(v)) for a, v in inputs.items()}}
        if signature_name:
            body["signature_name"] = signature_name
        path = _model_path(model, version, label) + ":predict"
        answer = self._send("POST", path, body, timeout)
        if not isinstance(answer, dict) or "outputs" not in answer:
            raise error_for(Code.INTERNAL, f"POST {path} answered without 'outputs'")
        signature = signature_name or DEFAULT_SIGNATURE
        key = (model, version, label, signature)
        outputs = self._decode(answer["outputs"], self._signature_outputs(key, timeout, False))
        if outputs is None:  # the model changed since its metadata was read
            outputs = self._decode(answer["outputs"], self._signature_outputs(key, timeout, True))
        if outputs is None:
            raise error_for(
                Code.INTERNAL,
                f"the answer's outputs do not match signature {signature!r} of model {model}",
            )
        return _filtered(outputs, output_filter) if output_filter else outputs

    def _signature_outputs(
        self, key: tuple[str, int | None, str | None, str], timeout: float | None, fresh: bool
    ) -> Outputs:
        with self._lock:
            known = None if fresh else self._outputs.get(key)
        if known is not None:
            return known
        model, version, label, signature = key
        signatures = self.get_model_metadata(model, version, label, timeout=timeout)
        found = signatures["signature_def"].get(signature)
        if found is None:
            raise error_for(
                Code.INTERNAL, f"model {model} answered but has no signature {signature!r}"
            )
        outputs = {
            alias: (numpy_dtype(info["dtype"]), info["shape"])
            for alias, info in found["outputs"].items()
        }
        with self._lock:
            self._outputs[key] = outputs
        return outputs

    @staticmethod
    def _decode(value: Any, outputs: Outputs) -> dict[str, np.ndarray] | None:
        """The answer's tensors by alias, or None when it does not fit ``outputs``."""
        if len(outputs) == 1:
            if isinstance(value, dict) and set(value) != {"b64"}:
                return None
            ((alias, (dtype, shape)),) = outputs.items()
            return {alias: from_json(value, dtype, shape)}
        if not isinstance(value, dict) or set(value) != set(outputs):
            return None
        return {alias: from_json(value[alias], *outputs[alias]) for alias in sorted(outputs)}

    # -- classify / regress -----------------------------------------------------------------

    def _examples_body(
        self,
        examples: Sequence[ExampleLike],
        context: ExampleLike | None,
        signature_name: str | None,
    ) -> dict[str, Any]:
        items = example_codec.example_list(examples)
        body: dict[str, Any] = {"examples": [example_codec.to_json(e) for e in items]}
        if context is not None:
            body["context"] = example_codec.to_json(context)
        if signature_name:
            body["signature_name"] = signature_name
        return body

    def _results(self, answer: Any, path: str) -> list[Any]:
        if not isinstance(answer, dict) or not isinstance(answer.get("results"), list):
            raise error_for(Code.INTERNAL, f"POST {path} answered without 'results'")
        results: list[Any] = answer["results"]
        return results

    def classify(
        self,
        model: str,
        examples: Sequence[ExampleLike],
        context: ExampleLike | None = None,
        *,
        version: int | None = None,
        label: str | None = None,
        signature_name: str | None = None,
        timeout: float | None = None,
    ) -> list[list[tuple[str, float]]]:
        """Per example, its (label, score) pairs; a model without labels answers ``""``."""
        check_selection(model, version, label)
        body = self._examples_body(examples, context, signature_name)
        path = _model_path(model, version, label) + ":classify"
        results = self._results(self._send("POST", path, body, timeout), path)
        return [[(str(c[0]), _float32(c[1])) for c in classes] for classes in results]

    def regress(
        self,
        model: str,
        examples: Sequence[ExampleLike],
        context: ExampleLike | None = None,
        *,
        version: int | None = None,
        label: str | None = None,
        signature_name: str | None = None,
        timeout: float | None = None,
    ) -> list[float]:
        check_selection(model, version, label)
        body = self._examples_body(examples, context, signature_name)
        path = _model_path(model, version, label) + ":regress"
        return [_float32(v) for v in self._results(self._send("POST", path, body, timeout), path)]

    # -- status / metadata ------------------------------------------------------------------

    def get_model_status(
        self,
        model: str,
        version: int | None = None,
        label: str | None = None,
        *,
        timeout: float | None = None,
    ) -> list[VersionStatus]:
        """Every version's state, newest first (one version's with ``version``). The server
        ignores ``label`` here, as TensorFlow Serving does."""
        check_selection(model, version, label)
        answer = self._send("GET", _model_path(model, version, label), None, timeout)
        return [
            VersionStatus(
                int(entry["version"]),
                entry["state"],
                entry.get("status", {}).get("error_code", "OK"),
                entry.get("status", {}).get("error_message", ""),
            )
            for entry in answer.get("model_version_status", [])
        ]

    def get_model_metadata(
        self,
        model: str,
        version: int | None = None,
        label: str | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        check_selection(model, version, label)
        path = _model_path(model, version, label) + "/metadata"
        answer = self._send("GET", path, None, timeout)
        try:
            spec = answer["model_spec"]
            signatures = json_format.ParseDict(
                answer["metadata"]["signature_def"], SignatureDefMap(), ignore_unknown_fields=True
            )
        except (KeyError, TypeError, json_format.ParseError) as err:
            raise error_for(
                Code.INTERNAL, f"GET {path} answered with unreadable metadata: {err}"
            ) from err
        version_text = spec.get("version")
        return metadata_dict(
            spec.get("name", model),
            int(version_text) if version_text not in (None, "") else None,
            spec.get("signature_name", ""),
            signatures,
        )

    def reload_config(self, models: Iterable[Any], *, timeout: float | None = None) -> None:
        raise UnimplementedError(
            "TensorFlow Serving's REST API has no config reload; use GrpcClient.reload_config "
            "(ModelService/HandleReloadConfigRequest)"
        )
