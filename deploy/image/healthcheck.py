"""The image's HEALTHCHECK: GET /readyz on the REST port graphserve (PID 1) was started with.

The port is read from PID 1's command line, where an extra `docker run` argument such as
--rest_api_port=9000 comes after the image's own (the last one wins, as in the flag parser).
With --rest_api_port=0 there is no REST API to ask: the process being alive is the answer.
"""

import sys
import urllib.request


def rest_port(cmdline: bytes) -> int:
    port = 8501
    args = cmdline.decode(errors="replace").split("\0")
    for i, arg in enumerate(args):
        for prefix in ("--rest_api_port=", "-rest_api_port="):
            if arg.startswith(prefix):
                port = int(arg[len(prefix):])
        if arg in ("--rest_api_port", "-rest_api_port") and i + 1 < len(args):
            port = int(args[i + 1])
    return port


def main() -> int:
    with open("/proc/1/cmdline", "rb") as f:
        port = rest_port(f.read())
    if port == 0:
        return 0
    urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=4).close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
