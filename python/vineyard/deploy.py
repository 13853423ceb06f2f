"""Starting daemons: one launcher (:func:`launch`) for everything that runs a
vineyardd — tests, benchmarks, the soak, ``vineyard.init()`` for notebooks.

The launcher waits for the daemon's own word that it serves, never for its
socket to appear: it passes a pipe as ``--ready-fd`` and reads one line,
``READY {json}``, that the daemon writes once every listener accepts
connections. A daemon that cannot start exits without writing it, and the
launcher raises :class:`DaemonError` with the end of what the daemon wrote
to stderr.

Standard library only until :func:`init` connects: the benchmark harness
loads this file by its path, without libv6d and inside other packages'
environments."""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Self

    from .client import Client

__all__ = ["Daemon", "DaemonError", "daemon_path", "init", "launch", "log_path", "shutdown", "start_vineyardd"]

# Upstream's submodule vineyard.deploy.local lives in the folder deploy/
# beside this file: a module with a __path__ is a package to the import
# system, so `import vineyard.deploy.local` finds it there.
__path__ = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "deploy")]


def binary_path(name: str, env: str) -> str:
    """A binary this package ships (vineyardd, vineyardctl): the one env
    names, the package's bin/NAME, or the checkout's build/NAME."""
    here = os.path.dirname(os.path.abspath(__file__))
    tried: list[str] = []
    for cand in (os.environ.get(env), os.path.join(here, "bin", name),
                 os.path.join(os.path.dirname(os.path.dirname(here)), "build", name)):
        if cand:
            tried.append(cand)
            if os.access(cand, os.X_OK):
                return cand
    raise FileNotFoundError("vineyard: {} not found (tried {})".format(name, ", ".join(tried)))


def daemon_path() -> str:
    """The daemon binary: env VINEYARDD, the package's bin/vineyardd, or the
    checkout's build/vineyardd."""
    return binary_path("vineyardd", "VINEYARDD")


class DaemonError(RuntimeError):
    """A daemon did not start: it exited (``returncode``) or did not say it
    was ready in time (``returncode`` None). ``output`` is the end of what it
    wrote to stderr (or to its log file)."""

    def __init__(self, message: str, returncode: int | None, output: str) -> None:
        super().__init__(message + (":\n" + output if output else ""))
        self.returncode = returncode
        self.output = output


class _Tail:
    """Copies a daemon's stderr to this process's stderr (or drops it) on a
    thread of its own, keeping the last lines for error messages."""

    def __init__(self, stream, echo: bool, lines: int = 40) -> None:
        self.lines: collections.deque[str] = collections.deque(maxlen=lines)
        self._stream, self._echo = stream, echo
        self._thread = threading.Thread(target=self._run, name="vineyardd-stderr", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for raw in iter(self._stream.readline, b""):
            line = raw.decode(errors="replace")
            self.lines.append(line.rstrip("\n"))
            if self._echo:
                try:
                    sys.stderr.write(line)
                except (OSError, ValueError):
                    pass
        self._stream.close()

    def text(self, timeout: float = 5.0) -> str:
        self._thread.join(timeout)
        return "\n".join(self.lines)


class Daemon:
    """A running vineyardd that :func:`launch` started.

    ``socket`` is its UNIX socket, ``rpc_endpoint`` its TCP listener's
    "host:port" (None without one), ``instance_id`` its instance id, ``proc``
    the process, ``log`` its log file (None when its stderr is this
    process's). :meth:`stop` stops it (SIGTERM, then SIGKILL after
    ``timeout``) and returns its exit status; :meth:`kill` kills it (no
    clean stop). Both are idempotent; a Daemon is a context manager that
    stops it."""

    def __init__(self, proc: subprocess.Popen, info: Mapping, log: str | None, tail: _Tail | None,
                 cleanup: contextlib.ExitStack) -> None:
        self.proc = proc
        self.socket: str = info["socket"]
        self.rpc_endpoint: str | None = info.get("rpc_endpoint") or None
        self.instance_id: int = int(info.get("instance_id", 0))
        self.log = log
        self._tail = tail
        self._cleanup = cleanup

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        """The end of what the daemon wrote (its stderr, or its log file)."""
        if self._tail is not None:
            return "\n".join(self._tail.lines)
        return _log_tail(self.log)

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a test may have stopped it
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._cleanup.close()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._cleanup.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.proc.poll() is None else f"exited {self.proc.returncode}"
        return f"<vineyard.deploy.Daemon pid={self.proc.pid} socket={self.socket!r} {state}>"


def _log_tail(log: str | None, lines: int = 40) -> str:
    """The last lines of a daemon's log file."""
    if log is None:
        return ""
    try:
        with open(log, errors="replace") as f:
            return "\n".join(f.read().splitlines()[-lines:])
    except OSError:
        return f"(log: {log})"


def _whose(log: str | None, output: str) -> str:
    """Names where the output quoted after an error message comes from."""
    if not output:
        return ""
    return f"; its log {log} ends with" if log is not None else "; its stderr ends with"


def _rpc_default(args: Sequence[str]) -> list[str]:
    """``args``, with ``--norpc`` first unless they set up the TCP listener."""
    rpc = any(a.lstrip("-").replace("_", "-").startswith("rpc") for a in args)
    return list(args) if rpc else ["--norpc", *args]


def _read_ready(fd: int, proc: subprocess.Popen, timeout: float) -> dict | None:
    """Reads the daemon's READY line from fd: its JSON, or None at end of
    file (the daemon exited without it). Raises TimeoutError after timeout
    seconds without either."""
    buf = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise TimeoutError
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        buf += chunk
    line = buf.split(b"\n", 1)[0].decode(errors="replace")
    if not line.startswith("READY "):
        raise DaemonError(f"vineyard: vineyardd (pid {proc.pid}) wrote {line!r} instead of READY", None, "")
    return json.loads(line[len("READY "):])


def launch(size: str | int = "1Gi", socket: str | None = None, args: Sequence[str] = (), *,
           log: str | None = None, quiet: bool = False, env: Mapping[str, str] | None = None,
           binary: str | None = None, rpc: bool = False, user: int | None = None,
           timeout: float = 60.0) -> Daemon:
    """Starts a vineyardd and returns once it serves (its READY line read).

    ``socket`` is its UNIX socket (None: ``vineyard.sock`` in a fresh temp
    directory under /tmp, removed when it stops; "": the daemon's default,
    ``--socket`` not given); ``args`` are more flags.
    Unless ``rpc`` or an ``--rpc...`` flag in ``args``, the TCP listener is
    off (``--norpc``), so that daemons never compete for port 9600. The
    daemon writes its log to this process's stderr (dropped with ``quiet``),
    or appends it to the file ``log``. ``env`` replaces the environment,
    ``binary`` the daemon (default :func:`daemon_path`); ``user`` runs it as
    that uid.

    Raises :class:`DaemonError` with the end of the daemon's output when it
    exits before it is ready, or is not ready within ``timeout`` seconds
    (then it is killed)."""
    cleanup = contextlib.ExitStack()
    try:
        if socket is None:
            tmp = tempfile.mkdtemp(prefix="vineyard-", dir="/tmp")
            cleanup.callback(shutil.rmtree, tmp, True)
            socket = os.path.join(tmp, "vineyard.sock")
        flags = list(args) if rpc else _rpc_default(args)
        r, w = os.pipe()
        try:
            where = ["--socket", socket] if socket else []
            argv = [binary or daemon_path(), *where, "--size", str(size), "--ready-fd", str(w), *flags]
            with contextlib.ExitStack() as files:
                out = files.enter_context(open(log, "ab")) if log is not None else subprocess.PIPE
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                        pass_fds=(w,), env=None if env is None else dict(env), user=user)
        finally:
            os.close(w)  # the daemon's copy is the only writer: its exit means end of file
        tail = _Tail(proc.stdout, echo=not quiet) if log is None else None
        try:
            info = _read_ready(r, proc, timeout)
        except BaseException as e:
            proc.kill()
            proc.wait()
            if not isinstance(e, TimeoutError):
                raise
            output = tail.text() if tail is not None else _log_tail(log)
            raise DaemonError(f"vineyard: vineyardd on {socket} was not ready within {timeout:g} s (killed)"
                              + _whose(log, output), None, output) from None
        finally:
            os.close(r)
        if info is None:  # it closed the pipe without a line: it is exiting
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            output = tail.text() if tail is not None else _log_tail(log)
            raise DaemonError(f"vineyard: vineyardd on {socket} exited with status {proc.returncode} "
                              "before it was ready" + _whose(log, output), proc.returncode, output)
        return Daemon(proc, info, log, tail, cleanup)
    except BaseException:
        cleanup.close()
        raise


@contextlib.contextmanager
def start_vineyardd(size: str = "1Gi", socket: str | None = None, log: str | None = None,
                    args: Sequence[str] = ()) -> Iterator[str]:
    """Runs a daemon (:func:`launch`) until the block ends and yields its
    socket path, as upstream's ``vineyard.deploy.local.start_vineyardd``
    does."""
    with launch(size, socket, args, log=log) as d:
        yield d.socket


_running: Daemon | None = None


def init(size: str = "1Gi", socket: str | None = None, *, spill_path: str | None = None,
         spill_lower_rate: float | None = None, spill_upper_rate: float | None = None) -> Client:
    """Starts a private daemon for this process (stopped at exit) and returns
    a client connected to it; sets VINEYARD_IPC_SOCKET. Later calls return a
    new client of the same daemon.

    ``spill_path`` turns spilling on (upstream's flags): objects no client
    holds move to files there when the arena's usage reaches
    ``spill_upper_rate`` of ``size`` (0.8), until it is at most
    ``spill_lower_rate`` (0.3); gets load them back.

    The daemon's log goes to a file, not to this process's output (a
    notebook stays clean): ``vineyardd.log`` in a fresh temp directory, or
    ``<socket>.log`` beside a ``socket`` given; :func:`log_path` names it.
    If the daemon cannot start, the error quotes the end of that log."""
    from .client import connect

    global _running
    if _running is None:
        tmp = None
        if socket is None:
            tmp = tempfile.mkdtemp(prefix="vineyard-", dir="/tmp")
            socket = os.path.join(tmp, "vineyard.sock")
            log = os.path.join(tmp, "vineyardd.log")
        else:
            log = socket + ".log"
        args: list[str] = []
        if spill_path is not None:
            args += ["--spill-path", spill_path]
        if spill_lower_rate is not None:
            args += ["--spill-lower-rate", str(spill_lower_rate)]
        if spill_upper_rate is not None:
            args += ["--spill-upper-rate", str(spill_upper_rate)]
        try:
            d = launch(size, socket, args, log=log)
        except BaseException:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            raise
        if tmp is not None:
            d._cleanup.callback(shutil.rmtree, tmp, True)
        _running = d
        os.environ["VINEYARD_IPC_SOCKET"] = d.socket
        atexit.register(shutdown)
    return connect(os.environ["VINEYARD_IPC_SOCKET"])


def log_path() -> str | None:
    """The log file of the daemon :func:`init` started, or None if none runs."""
    return _running.log if _running is not None else None


def shutdown() -> None:
    """Stops the daemon ``init`` started (no-op otherwise); a log file in a
    temp directory of init's own goes with it."""
    global _running
    if _running is not None:
        d, _running = _running, None
        d.stop()
