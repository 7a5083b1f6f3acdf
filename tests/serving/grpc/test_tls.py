"""TLS on the real daemon (``--ssl_config_file``): a self-signed CA and certificates made here
with the ``openssl`` command line; the server answers TLS clients that trust its CA and refuses
plaintext ones, and with ``client_verify`` only clients holding a certificate from ``custom_ca``.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np
import pytest

from protos.tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
from runtime.tensor_codec import make_tensor_proto, to_ndarray
from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import HALF_PLUS_TWO

OPENSSL = shutil.which("openssl")
MODEL = "half_plus_two"
TIMEOUT_S = 60

pytestmark = pytest.mark.skipif(OPENSSL is None, reason="needs the openssl command line")


@dataclass(frozen=True)
class Pem:
    key: bytes
    cert: bytes


class Authority:
    """A self-signed CA in ``directory`` that signs server and client certificates (P-256
    keys: quick to generate)."""

    def __init__(self, directory: Path, name: str) -> None:
        self.directory = directory
        self.name = name
        directory.mkdir(parents=True, exist_ok=True)
        self._key, self._cert = directory / f"{name}.key", directory / f"{name}.pem"
        self._openssl(
            "req", "-x509", *self._new_key(self._key), "-out", self._cert, "-days", "2",
            "-subj", f"/CN={name}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        )
        self.cert = self._cert.read_bytes()
        self._serials = itertools.count(2)

    @staticmethod
    def _new_key(path: Path) -> list[str | Path]:
        return ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", path]

    def _openssl(self, *args: str | Path) -> None:
        assert OPENSSL is not None
        done = subprocess.run(
            [OPENSSL, *map(str, args)], check=False, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr

    def issue(self, name: str, extensions: str) -> Pem:
        """A key and a certificate for ``name`` signed by this CA, with ``extensions``
        (``openssl x509 -extfile`` lines)."""
        key, csr, cert = (self.directory / f"{name}.{ext}" for ext in ("key", "csr", "pem"))
        extfile = self.directory / f"{name}.ext"
        extfile.write_text(extensions)
        self._openssl("req", "-new", *self._new_key(key), "-out", csr, "-subj", f"/CN={name}")
        self._openssl(
            "x509", "-req", "-in", csr, "-CA", self._cert, "-CAkey", self._key,
            "-set_serial", str(next(self._serials)), "-days", "2",
            "-out", cert, "-extfile", extfile,
        )
        return Pem(key.read_bytes(), cert.read_bytes())

    def server(self) -> Pem:
        # Clients dial 127.0.0.1, so the address must be among the names.
        return self.issue(
            "server",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        )

    def client(self, name: str = "client") -> Pem:
        return self.issue(name, "extendedKeyUsage=clientAuth\n")


@dataclass(frozen=True)
class Pki:
    ca: Authority
    server: Pem
    client: Pem  # signed by ca
    stranger: Authority  # another CA, unknown to the server
    stranger_client: Pem  # signed by stranger


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca = Authority(directory / "ca", "graphserve-test-ca")
    stranger = Authority(directory / "stranger", "stranger-ca")
    return Pki(ca, ca.server(), ca.client(), stranger, stranger.client("stranger-client"))


def text_string(value: bytes) -> str:
    """A text-format string literal (PEM is ASCII; newlines must be escaped)."""
    return '"' + value.decode().replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def start_daemon(pki: Pki, directory: Path, client_verify: bool) -> ServerProcess:
    config = directory / f"ssl_{'verify' if client_verify else 'plain'}.config"
    config.write_text(
        f"server_key: {text_string(pki.server.key)}\n"
        f"server_cert: {text_string(pki.server.cert)}\n"
        f"custom_ca: {text_string(pki.ca.cert)}\n"
        f"client_verify: {'true' if client_verify else 'false'}\n"
    )
    # Readiness is read over REST, which --ssl_config_file does not concern.
    return ServerProcess(
        [f"--model_name={MODEL}", f"--model_base_path={HALF_PLUS_TWO}",
         f"--ssl_config_file={config}"],
        [MODEL],
    )


def serve(pki: Pki, directory: Path, client_verify: bool) -> Iterator[ServerProcess]:
    server = start_daemon(pki, directory, client_verify)
    try:
        yield server
    finally:
        assert server.stop() == 0, server.output()


@pytest.fixture(scope="module")
def tls_server(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from serve(pki, tmp_path_factory.mktemp("tls"), client_verify=False)


@pytest.fixture(scope="module")
def mtls_server(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from serve(pki, tmp_path_factory.mktemp("mtls"), client_verify=True)


X = np.array([[1.0], [2.0], [5.0]], np.float32)


def predict(channel: grpc.Channel) -> np.ndarray:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = MODEL
    request.inputs["x"].CopyFrom(make_tensor_proto(X))
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    response = stub.Predict(request, timeout=TIMEOUT_S)
    return to_ndarray(response.outputs["y"])


def secure(server: ServerProcess, roots: bytes, client: Pem | None = None) -> grpc.Channel:
    credentials = grpc.ssl_channel_credentials(
        root_certificates=roots,
        private_key=client.key if client else None,
        certificate_chain=client.cert if client else None,
    )
    return grpc.secure_channel(f"127.0.0.1:{server.grpc_port}", credentials)


def refused(channel: grpc.Channel) -> grpc.RpcError:
    """The error a Predict over ``channel`` fails with (the test fails if it succeeds)."""
    with channel:
        try:
            predict(channel)
        except grpc.RpcError as err:
            return err
    raise AssertionError("Predict succeeded")


def test_tls_client_trusting_the_ca_gets_predictions(tls_server: ServerProcess, pki: Pki) -> None:
    with secure(tls_server, pki.ca.cert) as channel:
        np.testing.assert_array_equal(predict(channel), 0.5 * X + 2)


def test_plaintext_client_is_refused(tls_server: ServerProcess, pki: Pki) -> None:
    err = refused(grpc.insecure_channel(f"127.0.0.1:{tls_server.grpc_port}"))
    assert err.code() == grpc.StatusCode.UNAVAILABLE, err
    # The failed handshake leaves the server serving TLS.
    with secure(tls_server, pki.ca.cert) as channel:
        np.testing.assert_array_equal(predict(channel), 0.5 * X + 2)


def test_client_not_trusting_the_ca_is_refused(tls_server: ServerProcess, pki: Pki) -> None:
    err = refused(secure(tls_server, pki.stranger.cert))
    assert err.code() == grpc.StatusCode.UNAVAILABLE, err


def test_client_verify_refuses_a_client_without_certificate(
    mtls_server: ServerProcess, pki: Pki
) -> None:
    err = refused(secure(mtls_server, pki.ca.cert))
    assert err.code() == grpc.StatusCode.UNAVAILABLE, err


def test_client_verify_refuses_a_certificate_from_another_ca(
    mtls_server: ServerProcess, pki: Pki
) -> None:
    err = refused(secure(mtls_server, pki.ca.cert, pki.stranger_client))
    assert err.code() == grpc.StatusCode.UNAVAILABLE, err


def test_client_verify_accepts_a_certificate_from_custom_ca(
    mtls_server: ServerProcess, pki: Pki
) -> None:
    with secure(mtls_server, pki.ca.cert, pki.client) as channel:
        np.testing.assert_array_equal(predict(channel), 0.5 * X + 2)
