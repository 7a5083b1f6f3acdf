"""The smallest useful REST predict server: a raw ASGI callable, no framework, answering every
request with one fixed JSON body. The ceiling for a Python HTTP stack on this machine.

    .venv/bin/python bench/asgi_ceiling.py --port P --response FILE

Runs under uvicorn with uvloop and httptools (the stack graphserve's REST API runs on) and still
does what any ASGI predict endpoint must do per request: receive the whole body, send the
status, headers and body. It neither parses the request nor computes anything. Runs until
SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import uvicorn


def fixed_json_app(body: bytes) -> Any:
    start = {
        "type": "http.response.start",
        "status": 200,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
    }
    answer = {"type": "http.response.body", "body": body}

    async def app(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # lifespan is off; nothing else arrives
            return
        more = True
        while more:  # a predict server must read the request before it answers
            message = await receive()
            more = message.get("more_body", False)
        await send(start)
        await send(answer)

    return app


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--response", type=Path, required=True, help="the JSON body to answer")
    args = parser.parse_args(argv)
    app = fixed_json_app(args.response.read_bytes())
    uvicorn.run(app, host="127.0.0.1", port=args.port, loop="uvloop", http="httptools",
                lifespan="off", access_log=False, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
