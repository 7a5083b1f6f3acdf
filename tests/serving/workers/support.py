"""Finding a supervisor's workers and what they listen on, from ``/proc`` (tests and bench)."""

from __future__ import annotations

import os
from pathlib import Path


def workers_of(supervisor: int) -> list[int]:
    """The supervisor's child processes (its workers), by pid."""
    try:
        text = Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text()
    except FileNotFoundError:
        return []
    return sorted(int(pid) for pid in text.split())


def listening_ports(pid: int) -> set[int]:
    """TCP ports ``pid`` has a listening socket on."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports
