"""The image's HEALTHCHECK finds the REST port on PID 1's command line (deploy/image)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SCRIPT = Path(__file__).parents[2] / "deploy" / "image" / "healthcheck.py"
_spec = importlib.util.spec_from_file_location("image_healthcheck", _SCRIPT)
assert _spec is not None and _spec.loader is not None
healthcheck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(healthcheck)

ENTRYPOINT = ["/opt/graphserve/bin/python3", "/opt/graphserve/bin/graphserve", "--port=8500",
              "--rest_api_port=8501", "--model_name=m", "--model_base_path=/models/m"]


@pytest.mark.parametrize(
    ("extra", "port"),
    [
        ([], 8501),
        (["--rest_api_port=9000"], 9000),  # appended by `docker run IMAGE ...`: the last wins
        (["--rest_api_port", "9001"], 9001),
        (["-rest_api_port=9002"], 9002),
        (["--rest_api_port=0"], 0),  # no REST API: nothing to ask
        (["--rest_api_port_other=1"], 8501),
    ],
)
def test_the_rest_port_is_the_last_one_given(extra: list[str], port: int) -> None:
    cmdline = "\0".join([*ENTRYPOINT, *extra]).encode() + b"\0"
    assert healthcheck.rest_port(cmdline) == port
