"""make test-upstream-suite: upstream Vineyard's own tests, unchanged, against
our package and daemon, and (the control) against upstream's own.

The tests come from the pinned wheel (vineyard==0.24.2) in the upstream
venv the benchmarks and tests/interop use (build/bench/venv-upstream, made
once by benchmarks/harness/agents.ensure_venv); they are copied byte for byte
into build/upstream-suite/src/vineyard/ (only the test files and their
packages' __init__.py, never upstream's package itself).

Ours: build/venv's pytest with PYTHONPATH=python, so `import vineyard` is
ours; their extra test dependencies (tests/upstream/requirements.txt) go to
build/upstream-suite/site. One pytest process per file, each with a fresh
daemon of ours started by vineyard.deploy.launch (UNIX socket and a TCP
listener on 127.0.0.1, passed as --vineyard-ipc-socket and
--vineyard-endpoint; the fixtures are vineyard.conftest's, loaded with -p).
The cluster files (deploy/tests/test_distributed.py, test_migration.py) get
build/v6d-etcd and two daemons (--meta etcd) instead, and upstream's
--with-migration (its migration tests skip without it).

The control: the same files, the same way, against upstream: the upstream
venv's Python with upstream's package, its conftest, and its vineyardd
(vineyard-bdist, through `python -m vineyard`; for the cluster files two of
them on the same v6d-etcd), its test tools at build/venv's versions
(requirements.txt + requirements-control.txt, in
build/upstream-suite/site-control). Upstream's daemon listens on 0.0.0.0 for
RPC (it has no host flag), so the control runs in a network namespace of its
own (`unshare --net`, or with `--map-root-user` when not root), where only
its own loopback exists; where no namespace can be made the control is not
run, and the target says why. --no-control skips it.

Every test has a timeout (pytest-timeout, --per-test), and every file one
more (killed, the test it was in counted failed), so nothing hangs.

tests/upstream/expected-failures.txt lists, one line each, the tests that
fail against ours with the reason (an entry may be a file, for a file that
fails to import, and `*` in an entry matches anything; a reason that starts
with "[timeout=N]" gives a test known to hang N seconds instead of
--per-test). A reason says which kind: "upstream: ..." (upstream fails it
too on this machine), "difference: ..." (an intentional difference of ours,
docs/protocol.md), or "issue N: ..." (missing here). A test not listed must
pass (or skip); a listed test that passes is reported as XPASS and fails the
run too, so the list stays true; with the control, an entry whose kind the
control contradicts (an "upstream:" test that upstream passes, any other
that upstream fails too) fails the run as well. Prints the counts of ours,
upstream's and the expected failures by kind.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import fnmatch
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WORK = ROOT / "build" / "upstream-suite"
SRC = WORK / "src"
SITE = WORK / "site"
SITE_CONTROL = WORK / "site-control"
LIST = HERE / "expected-failures.txt"

# Files that need a cluster (etcd, several daemons): run after the others.
CLUSTER_FILES = ("vineyard/deploy/tests/test_distributed.py", "vineyard/deploy/tests/test_migration.py")

# Kinds of list entries, by the start of their reason.
KINDS = ("upstream", "difference", "issue")

Results = dict[str, tuple[str, str]]


def upstream_python() -> str:
    """The upstream venv's Python (the venv made on first use)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from harness import agents
    finally:
        sys.path.pop(0)
    return agents.ensure_venv("upstream", sys.stderr)


def upstream_package(python: str) -> Path:
    """upstream's installed package directory."""
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    pkg = Path(purelib) / "vineyard"
    if not (pkg / "conftest.py").exists():
        sys.exit(f"upstream-suite: no upstream package at {pkg}")
    return pkg


def ensure_site(python: str, site: Path, reqs: list[Path]) -> None:
    """Installs the pinned test dependencies ``reqs`` with ``python``'s pip into ``site``."""
    stamp = site / ".stamp"
    want = hashlib.sha256(b"".join(r.read_bytes() for r in reqs) + python.encode() + sys.version.encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == want:
        return
    shutil.rmtree(site, ignore_errors=True)
    argv = [python, "-m", "pip", "install", "--disable-pip-version-check", "-q", "--no-deps", "--target", str(site)]
    for r in reqs:
        argv += ["-r", str(r)]
    subprocess.run(argv, check=True)
    stamp.write_text(want)


def copy_tests(pkg: Path) -> None:
    """Copies upstream's test files (unchanged) under SRC."""
    shutil.rmtree(SRC, ignore_errors=True)
    for f in sorted(pkg.rglob("test_*.py")):
        dst = SRC / f.relative_to(pkg.parent)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dst)
        init = f.parent / "__init__.py"
        if init.exists():
            shutil.copyfile(init, dst.parent / "__init__.py")


def test_files(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The files under SRC that -k selects, relative to SRC, single-daemon
    files first; and the cluster files left out (--no-cluster)."""
    files = sorted((str(f.relative_to(SRC)) for f in SRC.rglob("test_*.py")), key=lambda f: (f in CLUSTER_FILES, f))
    files = [f for f in files if fnmatch.fnmatchcase(f, args.files) or fnmatch.fnmatchcase(f, f"*{args.files}*")]
    not_run = [f for f in files if f in CLUSTER_FILES and not args.cluster]
    return [f for f in files if f not in not_run], not_run


def load_list() -> dict[str, str]:
    """expected-failures.txt: `<test id or glob>  <reason>` per line."""
    out: dict[str, str] = {}
    for n, line in enumerate(LIST.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 1)
        if len(parts) != 2:
            sys.exit(f"{LIST}:{n}: want '<test id> <reason>'")
        if kind_of(parts[1]) is None:
            sys.exit(f"{LIST}:{n}: a reason starts with one of {', '.join(k + ':' for k in KINDS[:2])} or 'issue N:'")
        out[parts[0]] = parts[1]
    return out


def kind_of(reason: str) -> str | None:
    """The kind of a list entry's reason (after an optional [timeout=N])."""
    reason = re.sub(r"^\[timeout=\d+\]\s*", "", reason)
    m = re.match(r"(upstream|difference|issue \d+):", reason)
    return None if m is None else m.group(1).split()[0]


def _glob(pattern: str) -> re.Pattern[str]:
    """A list entry as a regex: `*` matches anything, every other character
    itself (test ids have brackets, which fnmatch would read as classes)."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")) + r"\Z")


def listed(test: str, expected: dict[str, str]) -> str | None:
    """The entry of the list that covers ``test``, or None."""
    if test in expected:
        return test
    for pattern in expected:
        if "*" in pattern and _glob(pattern).match(test):
            return pattern
    return None


class DaemonStartError(RuntimeError):
    pass


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (upstream's daemon takes no port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def etcd(tmp: str) -> Iterator[str]:
    """build/v6d-etcd (V6D_ETCD) on 127.0.0.1; yields its client URL."""
    etcd_bin = os.environ.get("V6D_ETCD") or str(ROOT / "build" / "v6d-etcd")
    url_file = f"{tmp}/etcd.url"
    with open(f"{tmp}/etcd.log", "wb") as log:
        proc = subprocess.Popen([etcd_bin, "-data-dir", f"{tmp}/etcd-data", "-endpoint-file", url_file],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (os.path.exists(url_file) and os.path.getsize(url_file) > 0):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise DaemonStartError(f"v6d-etcd did not start: {Path(tmp, 'etcd.log').read_text()[-1500:]}")
            time.sleep(0.05)
        yield Path(url_file).read_text().strip()
    finally:
        stop_group(proc)


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group of ``proc`` (its own session), SIGKILL after 30 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


class Ours:
    """Our package (build/venv, PYTHONPATH=python) and daemons (vineyard.deploy.launch)."""

    name = "ours"
    python = sys.executable

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "python"), str(SITE), str(HERE)])
        env.pop("VINEYARD_IPC_SOCKET", None)
        return env

    @contextlib.contextmanager
    def single(self, tmp: str) -> Iterator[list[str]]:
        from vineyard.deploy import launch

        with launch("2Gi", f"{tmp}/vineyard.sock", ["--rpc-socket-port", "0"], rpc=True,
                    log=f"{tmp}/vineyardd.log") as d:
            yield ["--vineyard-ipc-socket", d.socket, "--vineyard-endpoint", str(d.rpc_endpoint)]

    @contextlib.contextmanager
    def cluster(self, tmp: str) -> Iterator[list[str]]:
        """etcd and two daemons of ours sharing it (--meta etcd): the options of
        upstream's cluster tests."""
        from vineyard.deploy import launch

        with etcd(tmp) as url, contextlib.ExitStack() as daemons:
            flags = ["--meta", "etcd", "--etcd-endpoint", url, "--etcd-prefix", f"upstream-{os.getpid()}",
                     "--rpc-socket-port", "0"]
            ds = [daemons.enter_context(launch("1Gi", f"{tmp}/vineyard{i}.sock", flags, rpc=True,
                                               log=f"{tmp}/vineyardd{i}.log")) for i in range(2)]
            yield cluster_options([d.socket for d in ds], [str(d.rpc_endpoint) for d in ds])


class Upstream:
    """Upstream's package, conftest and vineyardd, from the upstream venv."""

    name = "upstream"

    def __init__(self, python: str) -> None:
        self.python = python

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("V6D_", "VINEYARD")) and k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        env["PYTHONPATH"] = os.pathsep.join([str(SITE_CONTROL), str(HERE)])
        env["PATH"] = os.pathsep.join([str(Path(self.python).parent), env.get("PATH", "")])
        return env

    @contextlib.contextmanager
    def daemon(self, tmp: str, sock: str, size: str, flags: list[str], log: str) -> Iterator[str]:
        """Upstream's vineyardd on ``sock`` and a free port; yields its endpoint
        once both accept connections (it has no readiness signal)."""
        port = free_port()
        argv = [self.python, "-m", "vineyard", "--socket", sock, "--size", size, "--rpc_socket_port", str(port), *flags]
        with open(log, "ab") as out:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    env=self.env(), cwd=tmp, start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while not (_connects(socket.AF_UNIX, sock) and _connects(socket.AF_INET, ("127.0.0.1", port))):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise DaemonStartError(f"upstream's vineyardd did not start: {Path(log).read_text()[-1500:]}")
                time.sleep(0.05)
            yield f"127.0.0.1:{port}"
        finally:
            stop_group(proc)

    @contextlib.contextmanager
    def single(self, tmp: str) -> Iterator[list[str]]:
        sock = f"{tmp}/vineyard.sock"
        with self.daemon(tmp, sock, "2Gi", ["--meta", "local"], f"{tmp}/vineyardd.log") as ep:
            yield ["--vineyard-ipc-socket", sock, "--vineyard-endpoint", ep]

    @contextlib.contextmanager
    def cluster(self, tmp: str) -> Iterator[list[str]]:
        with etcd(tmp) as url, contextlib.ExitStack() as daemons:
            flags = ["--meta", "etcd", "--etcd_endpoint", url, "--etcd_prefix", f"upstream-{os.getpid()}"]
            socks = [f"{tmp}/vineyard{i}.sock" for i in range(2)]
            eps = [daemons.enter_context(self.daemon(tmp, s, "1Gi", flags, f"{tmp}/vineyardd{i}.log"))
                   for i, s in enumerate(socks)]
            yield cluster_options(socks, eps)


def _connects(family: int, address: object) -> bool:
    with socket.socket(family) as s:
        try:
            s.connect(address)
            return True
        except OSError:
            return False


def cluster_options(sockets: list[str], endpoints: list[str]) -> list[str]:
    return ["--vineyard-ipc-sockets", ",".join(sockets), "--vineyard-endpoints", ",".join(endpoints),
            "--vineyard-ipc-socket", sockets[0], "--vineyard-endpoint", endpoints[0]]


def run_file(rel: str, system: Ours | Upstream, args: argparse.Namespace, results: Results) -> None:
    tmp = tempfile.mkdtemp(prefix=f"v6d-upstream-{system.name}-")
    out = Path(tmp) / "results.jsonl"
    env = system.env()
    env["PYTHONUNBUFFERED"] = "1"
    env["OPENBLAS_NUM_THREADS"] = "1"
    env["V6D_UPSTREAM_RESULTS"] = str(out)
    env["V6D_UPSTREAM_TIMEOUTS"] = json.dumps(args.short)
    env["TMPDIR"] = tmp
    started = time.monotonic()
    from vineyard.deploy import DaemonError

    try:
        daemons = system.cluster(tmp) if rel in CLUSTER_FILES else system.single(tmp)
        # upstream's cluster tests wait for their daemons (one sleeps 80 s)
        timeout = max(args.per_test, 120) if rel in CLUSTER_FILES else args.per_test
        with daemons as opts, open(Path(tmp) / "pytest.log", "w") as log:
            argv = [system.python, "-m", "pytest", str(SRC / rel), "-p", "vineyard.conftest", "-p", "plugin",
                    "-c", os.devnull, "--rootdir", str(SRC), "-q", "-rN", "--no-header", "-p", "no:cacheprovider",
                    f"--timeout={timeout}", *opts, *args.pytest_args]
            if rel in CLUSTER_FILES:
                argv.append("--with-migration")  # upstream's option of its migration tests: both systems migrate
            proc = subprocess.Popen(argv, cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                proc.wait(args.per_file)
                killed = False
            except subprocess.TimeoutExpired:
                killed = True
            finally:  # the file's own children (forks, daemons it started) go too
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    except (DaemonError, DaemonStartError) as e:  # every test of the file fails
        results[rel] = ("failed", f"daemon: {e}")
        return
    last = None
    seen = False
    if out.exists():
        for line in out.read_text().splitlines():
            rec = json.loads(line)
            if "start" in rec:
                last = rec["start"]
                continue
            seen = True
            prev = results.get(rec["id"])
            rank = {"passed": 0, "skipped": 1, "failed": 2}
            if prev is None or rank[rec["outcome"]] >= rank[prev[0]]:
                results[rec["id"]] = (rec["outcome"], rec.get("why", ""))
            if rec["id"] == last and rec.get("phase") == "teardown":
                last = None
    if killed:
        victim = last if last and last not in results else rel
        results[victim] = ("failed", f"killed after the file's timeout of {args.per_file} s")
    elif not seen and proc.returncode not in (0, 5):
        tail = (Path(tmp) / "pytest.log").read_text()[-1500:]
        results[rel] = ("failed", f"pytest exited {proc.returncode}: {tail}")
    took = time.monotonic() - started
    if args.verbose or killed:
        print(f"  {system.name}: {rel}: {took:.0f} s{' (killed)' if killed else ''}", flush=True)
    if args.keep:
        print(f"  logs: {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)


def loopback_up() -> None:
    """Brings up ``lo`` (SIOCSIFFLAGS): a new network namespace has it down."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = fcntl.ioctl(s, siocgifflags, struct.pack("16sH22x", b"lo", 0))
        flags = struct.unpack("16sH22x", req)[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sH22x", b"lo", flags | iff_up))


def unshare_argv() -> tuple[list[str] | None, str]:
    """The command prefix that runs a process in a network namespace of its
    own, or None and why not."""
    tool = shutil.which("unshare")
    if tool is None:
        return None, "no unshare(1) (util-linux)"
    why = ""
    for argv in ([tool, "--net"], [tool, "--net", "--map-root-user"]):
        try:
            proc = subprocess.run([*argv, "true"], check=False, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            why = str(e)
            continue
        if proc.returncode == 0:
            return argv, ""
        why = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
    return None, f"unshare --net failed: {why}"


def run_control(args: argparse.Namespace) -> tuple[Results | None, str]:
    """Runs the control (this file with --control-child) in a network
    namespace of its own; returns its results, or None and why not."""
    prefix, why = unshare_argv()
    if prefix is None:
        return None, why
    with tempfile.TemporaryDirectory(prefix="v6d-upstream-control-") as tmp:
        out = Path(tmp) / "control.json"
        argv = [*prefix, sys.executable, str(Path(__file__).resolve()), "--control-child", str(out), "-k", args.files,
                "--per-test", str(args.per_test), "--per-file", str(args.per_file)]
        argv += ["--no-cluster"] * (not args.cluster) + ["--keep"] * args.keep + ["--verbose"] * args.verbose
        argv += ["--", *args.pytest_args]
        env = dict(os.environ)
        env["V6D_UPSTREAM_PARENT_NETNS"] = os.readlink("/proc/self/ns/net")
        proc = subprocess.run(argv, env=env, check=False)
        if proc.returncode != 0 or not out.exists():
            return None, f"the control exited {proc.returncode}"
        return {t: (o, w) for t, (o, w) in json.loads(out.read_text()).items()}, ""


def control_child(args: argparse.Namespace) -> int:
    """Inside the control's network namespace: upstream against the files."""
    if os.readlink("/proc/self/ns/net") == os.environ.get("V6D_UPSTREAM_PARENT_NETNS"):
        sys.exit("upstream-suite: --control-child runs only in a network namespace of its own (run.py makes it)")
    loopback_up()
    args.short = {}  # the list's short timeouts are for ours' known hangs; upstream gets --per-test
    system = Upstream(upstream_python())
    files, _ = test_files(args)
    results: Results = {}
    for rel in files:
        run_file(rel, system, args, results)
    Path(args.control_child).write_text(json.dumps(results))
    return 0


def counts(results: Results) -> dict[str, int]:
    out = {"passed": 0, "failed": 0, "skipped": 0}
    for o, _ in results.values():
        out[o] += 1
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-k", "--files", default="*", help="glob of the test files to run (relative to build/upstream-suite/src)")
    p.add_argument("--per-test", type=int, default=60, help="timeout of one test, seconds")
    p.add_argument("--per-file", type=int, default=600, help="timeout of one file, seconds")
    p.add_argument("--no-cluster", dest="cluster", action="store_false",
                   help="skip the cluster files (etcd, two daemons; about two minutes each run)")
    p.add_argument("--cluster", action="store_true", default=True, help=argparse.SUPPRESS)  # the default; kept for old command lines
    p.add_argument("--no-control", action="store_true", help="do not run the tests against upstream (the control)")
    p.add_argument("--control-child", metavar="OUT", help=argparse.SUPPRESS)
    p.add_argument("--keep", action="store_true", help="keep each file's logs")
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = p.parse_args()
    expected = load_list()
    # "[timeout=N] reason": a listed test known to hang until its timeout
    # gets N seconds instead of --per-test (exact ids only).
    args.short = {t: int(m.group(1)) for t, why in expected.items() if (m := re.match(r"\[timeout=(\d+)\]", why))}
    if args.control_child:
        return control_child(args)

    started = time.monotonic()
    python = upstream_python()
    pkg = upstream_package(python)
    ensure_site(sys.executable, SITE, [HERE / "requirements.txt"])
    copy_tests(pkg)
    files, not_run = test_files(args)
    results: Results = {}
    print(f"upstream-suite: {len(files)} files of {pkg} (vineyard 0.24.2) against ours", flush=True)
    for rel in files:
        run_file(rel, Ours(), args, results)
    took_ours = time.monotonic() - started

    control: Results | None = None
    why_not = "--no-control"
    if not args.no_control:
        ensure_site(python, SITE_CONTROL, [HERE / "requirements.txt", HERE / "requirements-control.txt"])
        print(f"upstream-suite: the same {len(files)} files against upstream (the control)", flush=True)
        control, why_not = run_control(args)
        if control is None:
            print(f"upstream-suite: the control did not run: {why_not}", flush=True)

    passed = [t for t, (o, _) in results.items() if o == "passed"]
    skipped = [t for t, (o, _) in results.items() if o == "skipped"]
    failed = [t for t, (o, _) in results.items() if o == "failed"]
    xfail = [t for t in failed if listed(t, expected)]
    unexpected = [t for t in failed if not listed(t, expected)]
    xpass = [t for t in passed if listed(t, expected)]
    for t in sorted(unexpected):
        print(f"FAILED {t} - {results[t][1]}")
    for t in sorted(xpass):
        print(f"XPASS {t} - listed as: {expected[listed(t, expected)]}")  # type: ignore[index]
    by_kind: dict[str, list[str]] = {k: [] for k in KINDS}
    for t in xfail:
        by_kind[kind_of(expected[listed(t, expected)])].append(t)  # type: ignore[index]
    if args.verbose:
        for t in sorted(xfail):
            print(f"xfail {t} - {results[t][1]}")
    # The control checks each listed failure's kind: upstream's own failures
    # must fail against upstream, every other kind must pass there.
    mislisted = []
    if control is not None:
        for t in sorted(xfail):
            theirs = control.get(t, ("", ""))[0]
            kind = kind_of(expected[listed(t, expected)])  # type: ignore[index]
            if kind == "upstream" and theirs == "passed":
                mislisted.append(t)
                print(f"MISLISTED {t} - listed as upstream's own failure, but upstream passes it")
            elif kind != "upstream" and theirs == "failed":
                mislisted.append(t)
                print(f"MISLISTED {t} - upstream fails it too ({control[t][1]}); list it as 'upstream: ...'")
        if args.verbose:
            for t in sorted(t for t in passed if control.get(t, ("",))[0] == "failed"):
                print(f"ours passes, upstream fails: {t} - {control[t][1]}")
    for f in not_run:
        print(f"not run: {f} (cluster file; --no-cluster)")
    ran = {t.split("::")[0] for t in results}
    stale = [e for e in expected if not any(listed(t, {e: ""}) for t in results)
             and any(_glob(e.split("::")[0]).match(r) for r in ran)]
    for e in stale:
        print(f"STALE list entry (no such test ran): {e}")
    took = time.monotonic() - started
    print(f"upstream-suite: ours: {len(passed) - len(xpass)} passed, {len(xfail)} expected failures, "
          f"{len(skipped)} skipped, {len(unexpected)} unexpected failures, {len(xpass)} xpass; "
          f"{len(results)} total in {took_ours:.0f} s")
    if control is not None:
        c = counts(control)
        upstream_only = [t for t, (o, _) in control.items() if o == "passed" and results.get(t, ("",))[0] == "failed"]
        ours_only = [t for t, (o, _) in results.items() if o == "passed" and control.get(t, ("",))[0] == "failed"]
        print(f"upstream-suite: upstream (control): {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped; "
              f"{len(control)} total in {took - took_ours:.0f} s; upstream passes {len(upstream_only)} that ours fails, "
              f"ours passes {len(ours_only)} that upstream fails")
    else:
        print(f"upstream-suite: upstream (control): not run ({why_not})")
    print(f"upstream-suite: expected failures: {len(by_kind['upstream'])} upstream fails too, "
          f"{len(by_kind['difference'])} intentional differences, {len(by_kind['issue'])} missing here")
    bad = len(unexpected) + len(xpass) + len(stale) + len(mislisted)
    # The closing line: failed counts only what the list does not allow.
    print(f"upstream-suite: {len(passed) - len(xpass)} passed, {bad} failed, {len(skipped)} skipped")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
