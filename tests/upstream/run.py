"""make test-upstream-suite: upstream Vineyard's own tests, unchanged, against
our package and daemon.

The tests come from the pinned wheel (vineyard==0.24.2) in the upstream
venv the benchmarks and tests/interop use (build/bench/venv-upstream, made
once by benchmarks/harness/agents.ensure_venv); they are copied byte for byte
into build/upstream-suite/src/vineyard/ (only the test files and their
packages' __init__.py, never upstream's package itself) and run by build/venv's
pytest with PYTHONPATH=python, so `import vineyard` is ours. Their extra test
dependencies (tests/upstream/requirements.txt) go to build/upstream-suite/site.

One pytest process per file, each with a fresh daemon of ours started by
vineyard.deploy.launch (UNIX socket and a TCP listener on 127.0.0.1, passed
as --vineyard-ipc-socket and --vineyard-endpoint; the fixtures are
vineyard.conftest's, loaded with -p). Every test has a timeout
(pytest-timeout, --per-test), and every file one more (killed, the test it
was in counted failed), so nothing hangs.

tests/upstream/expected-failures.txt lists, one line each, the tests that
fail with the reason (an entry may be a file, for a file that fails to
import, and `*` in an entry matches anything; a reason that starts with
"[timeout=N]" gives a test known to hang N seconds instead of --per-test). A test not listed must pass (or skip); a listed test
that passes is reported as XPASS and fails the run too, so the list stays
true. Prints the counts: passed / expected failures / skipped / total.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WORK = ROOT / "build" / "upstream-suite"
SRC = WORK / "src"
SITE = WORK / "site"
LIST = HERE / "expected-failures.txt"

# Files that need a cluster (etcd, several daemons): run after the others.
CLUSTER_FILES = ("vineyard/deploy/tests/test_distributed.py", "vineyard/deploy/tests/test_migration.py")


def upstream_package() -> Path:
    """upstream's installed package directory (its venv made on first use)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from harness import agents
    finally:
        sys.path.pop(0)
    python = agents.ensure_venv("upstream", sys.stderr)
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    pkg = Path(purelib) / "vineyard"
    if not (pkg / "conftest.py").exists():
        sys.exit(f"upstream-suite: no upstream package at {pkg}")
    return pkg


def ensure_site() -> None:
    """Installs the pinned extra test dependencies into build/upstream-suite/site."""
    req = HERE / "requirements.txt"
    stamp = SITE / ".stamp"
    want = hashlib.sha256(req.read_bytes() + sys.version.encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == want:
        return
    shutil.rmtree(SITE, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-q", "--no-deps",
                    "--target", str(SITE), "-r", str(req)], check=True)
    stamp.write_text(want)


def copy_tests(pkg: Path) -> list[str]:
    """Copies upstream's test files (unchanged) under SRC; returns them,
    relative to SRC, single-daemon files first."""
    shutil.rmtree(SRC, ignore_errors=True)
    files = []
    for f in sorted(pkg.rglob("test_*.py")):
        rel = f.relative_to(pkg.parent)
        dst = SRC / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dst)
        init = f.parent / "__init__.py"
        if init.exists():
            shutil.copyfile(init, dst.parent / "__init__.py")
        files.append(str(rel))
    return sorted(files, key=lambda f: (f in CLUSTER_FILES, f))


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
        out[parts[0]] = parts[1]
    return out


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


def env_for() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "python"), str(SITE), str(HERE)])
    env["PYTHONUNBUFFERED"] = "1"
    env["OPENBLAS_NUM_THREADS"] = "1"
    env.pop("VINEYARD_IPC_SOCKET", None)
    return env


@contextlib.contextmanager
def single_daemon(tmp: str):
    from vineyard.deploy import launch

    with launch("2Gi", f"{tmp}/vineyard.sock", ["--rpc-socket-port", "0"], rpc=True,
                log=f"{tmp}/vineyardd.log") as d:
        yield ["--vineyard-ipc-socket", d.socket, "--vineyard-endpoint", str(d.rpc_endpoint)], d.socket


@contextlib.contextmanager
def cluster(tmp: str):
    """etcd (build/v6d-etcd, V6D_ETCD) and two daemons of ours sharing it
    (--meta etcd): the options of upstream's cluster tests."""
    from vineyard.deploy import launch

    etcd_bin = os.environ.get("V6D_ETCD") or str(ROOT / "build" / "v6d-etcd")
    url_file = f"{tmp}/etcd.url"
    with open(f"{tmp}/etcd.log", "wb") as log:
        etcd = subprocess.Popen([etcd_bin, "-data-dir", f"{tmp}/etcd-data", "-endpoint-file", url_file],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (os.path.exists(url_file) and os.path.getsize(url_file) > 0):
            if etcd.poll() is not None or time.monotonic() > deadline:
                raise DaemonStartError(f"v6d-etcd did not start: {Path(tmp, 'etcd.log').read_text()[-1500:]}")
            time.sleep(0.05)
        url = Path(url_file).read_text().strip()
        flags = ["--meta", "etcd", "--etcd-endpoint", url, "--etcd-prefix", f"upstream-{os.getpid()}",
                 "--rpc-socket-port", "0"]
        with contextlib.ExitStack() as daemons:
            ds = [daemons.enter_context(launch("1Gi", f"{tmp}/vineyard{i}.sock", flags, rpc=True,
                                               log=f"{tmp}/vineyardd{i}.log")) for i in range(2)]
            sockets = ",".join(d.socket for d in ds)
            endpoints = ",".join(str(d.rpc_endpoint) for d in ds)
            yield ["--vineyard-ipc-sockets", sockets, "--vineyard-endpoints", endpoints,
                   "--vineyard-ipc-socket", ds[0].socket, "--vineyard-endpoint", str(ds[0].rpc_endpoint)], ds[0].socket
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(etcd.pid, signal.SIGTERM)
        try:
            etcd.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(etcd.pid, signal.SIGKILL)
            etcd.wait()


class DaemonStartError(RuntimeError):
    pass


def run_file(rel: str, args: argparse.Namespace, results: dict[str, tuple[str, str]]) -> None:
    tmp = tempfile.mkdtemp(prefix="v6d-upstream-")
    out = Path(tmp) / "results.jsonl"
    env = env_for()
    env["V6D_UPSTREAM_RESULTS"] = str(out)
    env["V6D_UPSTREAM_TIMEOUTS"] = json.dumps(args.short)
    env["TMPDIR"] = tmp
    started = time.monotonic()
    from vineyard.deploy import DaemonError

    try:
        daemons = cluster(tmp) if rel in CLUSTER_FILES else single_daemon(tmp)
        # upstream's cluster tests wait for their daemons (one sleeps 80 s)
        timeout = max(args.per_test, 120) if rel in CLUSTER_FILES else args.per_test
        with daemons as (opts, _), open(Path(tmp) / "pytest.log", "w") as log:
            argv = [sys.executable, "-m", "pytest", str(SRC / rel), "-p", "vineyard.conftest", "-p", "plugin",
                    "-c", os.devnull, "--rootdir", str(SRC), "-q", "-rN", "--no-header", "-p", "no:cacheprovider",
                    f"--timeout={timeout}", *opts, *args.pytest_args]
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
        print(f"  {rel}: {took:.0f} s{' (killed)' if killed else ''}", flush=True)
    if args.keep:
        print(f"  logs: {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-k", "--files", default="*", help="glob of the test files to run (relative to build/upstream-suite/src)")
    p.add_argument("--per-test", type=int, default=60, help="timeout of one test, seconds")
    p.add_argument("--per-file", type=int, default=600, help="timeout of one file, seconds")
    p.add_argument("--cluster", action="store_true", help="also run the cluster files (etcd, two daemons)")
    p.add_argument("--keep", action="store_true", help="keep each file's logs")
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = p.parse_args()

    started = time.monotonic()
    pkg = upstream_package()
    ensure_site()
    files = [f for f in copy_tests(pkg) if fnmatch.fnmatchcase(f, args.files) or fnmatch.fnmatchcase(f, f"*{args.files}*")]
    not_run = [f for f in files if f in CLUSTER_FILES and not args.cluster]
    files = [f for f in files if f not in not_run]
    expected = load_list()
    # "[timeout=N] reason": a listed test known to hang until its timeout
    # gets N seconds instead of --per-test (exact ids only).
    args.short = {t: int(m.group(1)) for t, why in expected.items() if (m := re.match(r"\[timeout=(\d+)\]", why))}
    results: dict[str, tuple[str, str]] = {}
    print(f"upstream-suite: {len(files)} files of {pkg} (vineyard 0.24.2) against ours", flush=True)
    for rel in files:
        run_file(rel, args, results)

    passed = [t for t, (o, _) in results.items() if o == "passed"]
    skipped = [t for t, (o, _) in results.items() if o == "skipped"]
    failed = [t for t, (o, _) in results.items() if o == "failed"]
    xfail = [t for t in failed if listed(t, expected)]
    unexpected = [t for t in failed if not listed(t, expected)]
    xpass = [t for t in passed if listed(t, expected)]
    for t in sorted(unexpected):
        print(f"FAILED {t} - {results[t][1]}")
    for t in sorted(xpass):
        print(f"XPASS {t} - listed as: {expected[listed(t, expected)]}")
    if args.verbose:
        for t in sorted(xfail):
            print(f"xfail {t} - {results[t][1]}")
    for f in not_run:
        print(f"not run: {f} (cluster file; --cluster)")
    ran = {t.split("::")[0] for t in results}
    stale = [e for e in expected if not any(listed(t, {e: ""}) for t in results)
             and any(_glob(e.split("::")[0]).match(r) for r in ran)]
    for e in stale:
        print(f"STALE list entry (no such test ran): {e}")
    print(f"upstream-suite: {len(passed) - len(xpass)} passed, {len(xfail)} expected failures, "
          f"{len(skipped)} skipped, {len(unexpected)} unexpected failures, {len(xpass)} xpass; "
          f"{len(results)} total in {time.monotonic() - started:.0f} s")
    bad = len(unexpected) + len(xpass) + len(stale)
    # The closing line: failed counts only what the list does not allow.
    print(f"upstream-suite: {len(passed) - len(xpass)} passed, {bad} failed, {len(skipped)} skipped")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
