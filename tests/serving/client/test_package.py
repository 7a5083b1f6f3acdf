"""What importing the client drags in."""

from __future__ import annotations

import subprocess
import sys


def test_the_client_imports_neither_tensorflow_nor_httpx() -> None:
    """gRPC users need neither; httpx comes in with the REST client only."""
    code = (
        "import sys, serving.client, serving.client.cli; "
        "assert 'tensorflow' not in sys.modules and 'httpx' not in sys.modules; "
        "from serving.client import RestClient; assert 'httpx' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
