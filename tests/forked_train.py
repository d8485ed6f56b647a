"""``python train.py …`` forked from an interpreter that has already imported torch, Lightning and
Hydra, for ``helpers.run_train``.

A train.py process spends 3–6 s importing its libraries (most under ``pytorch_lightning``:
torchmetrics, scipy.signal, torch._dynamo) against about a second of training at debug=fast;
the suite starts dozens (docs/benchmarks.md, "Suite time"). The property most of those tests
check, what the script prints, exits with and writes, is the script's, not its interpreter's
start, so each case here runs in a fork of one server that imported those libraries once, as
the interpreter would run it: train.py executed as ``__main__`` (``runpy``) with its own
``sys.argv``, working folder, stdin at /dev/null and stdout, stderr in files, then the
interpreter's own shutdown (non-daemon threads joined, ``atexit`` run) and its exit status
(an uncaught exception: the traceback and 1; a signal: minus its number).

One server per environment: torch and matplotlib read theirs at import, so a case forks from a
server started with exactly the environment its process would have had (``server_for``: an
environment's first case runs in a process of its own, its second starts the server, at most
``MAX_SERVERS`` per test process). What a fork cannot be, the
callers keep a process of their own for: signals sent to the process (those tests use ``Popen``),
and everything about start-up (imports, caches made at import, ``tests/test_preflight``'s
"torch is not imported"). ``LENGEN_TESTS_FORK=0`` runs every ``run_train`` case in a process of
its own.

Protocol: the server reads one JSON request per line ({script, argv, cwd, timeout, stdout,
stderr}: the script, train.py, and the two file paths to write) on its stdin and answers one
line, {"returncode": int} or {"timed_out": true} (the case killed at its timeout, as
``subprocess.run`` does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAIN = str(ROOT / "train.py")


class Server:
    """One forking server, started with ``env``; ``run`` one case at a time (a lock: a second
    caller at the same time gets None and starts a process of its own)."""

    def __init__(self, env: dict[str, str]):
        self.env, self.lock = env, threading.Lock()
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # the server prints nothing; a failed start reads as EOF
            cwd=ROOT,
            env=env,
            text=True,
        )
        self.ready = self.process.stdout.readline().strip() == "ready"

    def run(
        self, arguments, cwd, timeout, stdout: Path, stderr: Path, script: str = TRAIN
    ) -> dict | None:
        if not self.ready or not self.lock.acquire(blocking=False):
            return None
        try:
            request = {"script": script, "argv": list(arguments), "cwd": str(cwd),
                       "timeout": timeout, "stdout": str(stdout), "stderr": str(stderr)}  # fmt: skip
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            answer = self.process.stdout.readline()
            if not answer:  # the server died: this case and later ones get a process of their own
                self.ready = False
                return None
            return json.loads(answer)
        except (BrokenPipeError, OSError):
            self.ready = False
            return None
        finally:
            self.lock.release()

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


_SERVERS: dict[frozenset, Server] = {}
#: environments seen once: a server is started for the second case with the same environment
_SEEN: set[frozenset] = set()
#: servers per test process (each holds torch and Lightning imported, ~0.3 GB): the suite's
#: environment with and without OMP_NUM_THREADS=1, and two that in-process tests left changed
MAX_SERVERS = 4


def server_for(env: dict[str, str]) -> Server | None:
    """The server for ``env``, started the second time a case asks with it (a test's one-off
    environment, a monkeypatched cache folder, would pay a server's imports for one case) and
    stopped when the test process exits; None the first time and once ``MAX_SERVERS`` run."""
    key = frozenset(env.items())
    if key not in _SERVERS:
        if key not in _SEEN or len(_SERVERS) >= MAX_SERVERS:
            _SEEN.add(key)
            return None
        if not _SERVERS:
            import atexit

            atexit.register(lambda: [server.close() for server in _SERVERS.values()])
        _SERVERS[key] = Server(env)
    return _SERVERS[key]


# ---- the server's side ----------------------------------------------------------------------


def _run_case(request: dict) -> None:
    """In the forked child: the case, then the interpreter's shutdown; never returns."""
    import atexit
    import runpy
    import signal
    import traceback

    status = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for source, target in ((null, 0), (out, 1), (err, 2)):
            os.dup2(source, target)
            os.close(source)
        os.chdir(request["cwd"])
        sys.argv = [request["script"], *request["argv"]]
        try:
            runpy.run_path(request["script"], run_name="__main__")
            status = 0
        except SystemExit as stop:  # as the interpreter turns it into an exit status
            if stop.code is None or isinstance(stop.code, int):
                status = stop.code or 0
            else:
                print(stop.code, file=sys.stderr)
                status = 1
        except KeyboardInterrupt:  # the interpreter's traceback, then death by SIGINT
            traceback.print_exc()
            status = -signal.SIGINT
        except BaseException:  # an uncaught exception: the interpreter's traceback, status 1
            traceback.print_exc()
            status = 1
        threading._shutdown()  # as at the interpreter's exit: non-daemon threads are joined
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        if status == -signal.SIGINT:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        os._exit(status & 0xFF if status >= 0 else 1)


def _wait(pid: int, timeout: float) -> dict:
    import signal
    import time

    deadline = time.monotonic() + timeout
    while True:
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            return {"returncode": os.waitstatus_to_exitcode(wait_status)}
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return {"timed_out": True}
        time.sleep(0.01)


def _serve() -> None:
    # the protocol on fds of its own: what the imports or a case print cannot reach it
    requests = os.fdopen(os.dup(0), "r")
    answers = os.fdopen(os.dup(1), "w")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    sys.path[0] = str(ROOT)  # as `python train.py` has it: the script's folder, not tests/

    # as train.py does before anything imports matplotlib or torch
    from lengen.caches import use_lengen_caches

    use_lengen_caches()
    # train.py imports Lightning after Hydra has set up logging; Lightning and Fabric give their
    # loggers a console handler of their own, bypassing lengen's filter (lengen.logs), when the
    # root logger has none at their import
    import logging

    standing_in = logging.NullHandler()
    logging.getLogger().addHandler(standing_in)
    import hydra  # noqa: F401
    import omegaconf  # noqa: F401
    import pytorch_lightning  # noqa: F401  (torch, torchmetrics, matplotlib, scipy with it)
    import torch  # noqa: F401

    logging.getLogger().removeHandler(standing_in)

    answers.write("ready\n")
    answers.flush()
    for line in requests:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            requests.close()
            answers.close()
            _run_case(request)
        answers.write(json.dumps(_wait(pid, request["timeout"])) + "\n")
        answers.flush()


if __name__ == "__main__":
    _serve()
