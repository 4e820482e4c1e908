"""`python -m config.web`: the web server, WEB_PROCESSES daphne processes sharing one listening
socket (the kernel hands each new connection to one of them), so that a machine's cores all
answer questions: one Python process runs its pipeline on one core at a time. Without REDIS_URL
the default is one process (a Stop from another tab reaches only its own process).

    python -m config.web --host 127.0.0.1 --port 8000 --processes 2

The socket is bound here once and passed to every daphne (`--fd`). SIGTERM or SIGINT stops them
all; if one exits on its own the others are stopped and the exit status is its own. Nothing is
shared between the processes but the database (and Redis when REDIS_URL is set): rate limits
and the flood rule are counted in PostgreSQL, the cache is the database's, and the WebSocket
consumer uses no channel-layer groups, so any process may serve any request.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time

STOP_TIMEOUT = 30.0
DEFAULT_PROCESSES = 2  # with REDIS_URL; without it, one
ONE_PROCESS_WARNING = (
    "config.web: {processes} processes without REDIS_URL: a Stop pressed in a tab served by "
    "another process than the one answering is lost (the in-memory channel layer is per "
    "process). Set REDIS_URL, or run one process."
)


def processes_default() -> int:
    """WEB_PROCESSES from the environment, else DEFAULT_PROCESSES with REDIS_URL set and 1
    without: the processes route a Stop to the one running the answer through Redis' channel
    layer, the in-memory one reaches only its own process
    (docs/decisions/0106-stuck-states-and-stop-frames.md)."""
    default = DEFAULT_PROCESSES if os.environ.get("REDIS_URL") else 1
    return int(os.environ.get("WEB_PROCESSES", default))


def listening_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


def daphne_command(fd: int, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "daphne", "--fd", str(fd), *extra, "config.asgi:application"]


def serve(*, host: str, port: int, processes: int, extra: list[str]) -> int:
    """Run `processes` daphne processes on one socket until a signal or one of them exits;
    the exit status."""
    sock = listening_socket(host, port)
    children = [
        subprocess.Popen(daphne_command(sock.fileno(), extra), pass_fds=(sock.fileno(),))
        for _ in range(processes)
    ]
    sock.close()  # the children hold it
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    status = 0
    while not stopping:
        ended = [child for child in children if child.poll() is not None]
        if ended:
            status = ended[0].returncode or 1
            print(
                f"config.web: daphne pid {ended[0].pid} exited ({ended[0].returncode}); "
                "stopping the others.",
                file=sys.stderr,
            )
            break
        time.sleep(0.2)
    for child in children:
        if child.poll() is None:
            child.terminate()
    deadline = time.monotonic() + STOP_TIMEOUT
    for child in children:
        try:
            child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument(
        "--processes",
        type=int,
        default=processes_default(),
        help=f"daphne processes (default: WEB_PROCESSES, else {DEFAULT_PROCESSES} with "
        "REDIS_URL set, 1 without)",
    )
    args, extra = parser.parse_known_args(argv)
    if args.processes < 1:
        parser.error("--processes must be at least 1")
    if args.processes > 1 and not os.environ.get("REDIS_URL"):
        print(ONE_PROCESS_WARNING.format(processes=args.processes), file=sys.stderr)
    return serve(host=args.host, port=args.port, processes=args.processes, extra=extra)


if __name__ == "__main__":
    sys.exit(main())
