"""The JSON-lines agent protocol: one process, driven one command at a time.

A driver starts an agent process (``Agent``) and sends it one JSON object per line,
``{"cmd": NAME, ...arguments}``; the agent (``serve``) calls the handler of that name
with the arguments and answers one line: ``{"ok": true, ...what it returned}``, or
``{"ok": false, "error": "Type: message", "trace": ...}`` when it raised (the agent goes
on). Used by the benchmark agents (harness/agent.py) and the interop suite's clients
(tests/interop/agent.py).

Standard library only, and nothing else imported at module level: an agent runs in
whichever environment it drives (upstream Vineyard's virtual environment among them).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, TextIO

Handler = Callable[..., "dict[str, Any] | None"]


def take_stdout() -> TextIO:
    """The stdout the process was started with, for the replies; from now on whatever
    else the process prints (libraries, daemons it starts) goes to stderr. Call it before
    importing what may print."""
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return replies


def serve(handlers: Mapping[str, Handler], *, replies: TextIO | None = None,
          answers: Mapping[type[BaseException], str] | None = None, last: tuple[str, ...] = (),
          trace_chars: int | None = None) -> None:
    """Answers commands read from stdin until it ends (or after a command in last).

    Replies go to replies, by default take_stdout(). An exception of a class in
    answers is a reply ``{"ok": false, answers[cls]: message}`` (for instance "na" for a
    figure that does not apply); any other is an error reply, its trace cut to its last
    trace_chars characters when given."""
    if replies is None:
        replies = take_stdout()
    known = tuple(answers or ())
    for line in sys.stdin:
        cmd = None
        try:
            req = json.loads(line)
            cmd = req.pop("cmd")
            if cmd not in handlers:
                raise ValueError(f"unknown command {cmd}")
            reply: dict[str, Any] = {"ok": True, **(handlers[cmd](**req) or {})}
        except known as e:
            key = next(k for cls, k in (answers or {}).items() if isinstance(e, cls))
            reply = {"ok": False, key: str(e)}
        except Exception as e:  # noqa: BLE001 - every failure is answered, the agent goes on
            trace = traceback.format_exc()
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}",
                     "trace": trace if trace_chars is None else trace[-trace_chars:]}
        replies.write(json.dumps(reply) + "\n")
        if cmd in last:
            return


class Agent:
    """An agent process (its own session, stderr to log, named name in errors); ``call``
    sends one command and waits for its reply."""

    def __init__(self, argv: list[str], *, name: str = "agent", env: Mapping[str, str] | None = None,
                 cwd: str | None = None, log: str | Path | None = None, timeout: float = 600) -> None:
        self.name = name
        self.log = str(log) if log is not None else None
        self.timeout = timeout
        fd = os.open(self.log or os.devnull, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            self.proc = subprocess.Popen(argv, cwd=cwd, env=None if env is None else dict(env),
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=fd,
                                         start_new_session=True)
        finally:
            os.close(fd)
        self._sel = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self._sel.register(self.proc.stdout, selectors.EVENT_READ)
        self._buf = b""

    def _exited(self, what: str) -> RuntimeError:
        msg = f"{self.name} exited with status {self.proc.wait()}{what}"
        if self.log:
            with contextlib.suppress(OSError):
                msg += ": " + Path(self.log).read_text(errors="replace")[-3000:]
        return RuntimeError(msg)

    def call(self, cmd: str, timeout: float | None = None, **args: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        timeout = self.timeout if timeout is None else timeout
        try:
            self.proc.stdin.write((json.dumps({"cmd": cmd, **args}) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise self._exited("") from None
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise TimeoutError(f"{self.name}: {cmd} took more than {timeout:.0f} s")
            if self._sel.select(left):
                chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    raise self._exited(f" during {cmd}")
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def close(self, stop: str | None = None, wait: float = 30) -> None:
        """Ends the agent: the command stop first when given, then the end of its stdin;
        killed when it has not exited wait seconds later."""
        if self.proc.poll() is None:
            if stop is not None:
                with contextlib.suppress(Exception):  # ending anyway
                    self.call(stop, timeout=120)
            with contextlib.suppress(OSError):
                assert self.proc.stdin is not None
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """Kills the agent and what it started (its own process group)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
