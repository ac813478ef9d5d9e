"""A real ``redis-server`` of its own for the tests (Debian's package: ``make
test`` installs it with apt-get when it is missing, .ci/redis-server), used by the
kombu Redis transport's tests and by the selector index's glob oracle.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from pathlib import Path

#: Debian's redis-server (``make test`` installs it with apt-get when it is missing).
REDIS_SERVER = shutil.which("redis-server")


class RedisServer:
    """A ``redis-server`` of its own on 127.0.0.1, at a port that was free, in
    ``workdir``, with persistence off (no RDB snapshots, no append-only file).

    Starting waits at most ``start_timeout`` seconds per try for the server to
    answer ``PING``; a port taken between the probe and the server's bind is
    retried with another port, three tries in all.  :meth:`stop` ends it (SIGTERM,
    then SIGKILL after 10 s).
    """

    def __init__(self, binary: str, workdir: Path, start_timeout: float = 30.0) -> None:
        self.binary = binary
        self.workdir = workdir
        self.log = workdir / "redis-server.log"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        failures = []
        for _ in range(3):
            self.port = _free_port()
            if self._start(start_timeout):
                return
            failures.append(f"port {self.port}: {self._log_tail()}")
        raise RuntimeError("redis-server did not start:\n" + "\n".join(failures))

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def _start(self, timeout: float) -> bool:
        # fmt: off
        args = [
            self.binary,
            "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no",
            "--dir", str(self.workdir), "--daemonize", "no",
        ]
        # fmt: on
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False  # it exited: most likely the port was taken meanwhile
            if self.command(b"PING") == b"+PONG":
                return True
            time.sleep(0.05)
        self.stop()
        return False

    def command(self, *words: bytes) -> bytes | None:
        """Send one command, return the first line of the reply (None: no answer)."""
        payload = b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in words)
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
                sock.sendall(payload)
                reply = b""
                while not reply.endswith(b"\r\n"):
                    chunk = sock.recv(4096)
                    if not chunk:
                        return None
                    reply += chunk
                return reply.split(b"\r\n", 1)[0]
        except OSError:
            return None

    def flush(self) -> None:
        """Empty every database."""
        assert self.command(b"FLUSHALL") == b"+OK"

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return " | ".join(self.log.read_text(errors="replace").splitlines()[-3:])
        return "(no log)"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
