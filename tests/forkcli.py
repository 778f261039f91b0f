"""``python -m toolbench_lib ARGS`` as a real process without paying its imports each time: one server process
imports the CLI once, then forks a child per call, which sets the call's environment, working folder and
argv, runs the package's ``__main__`` and exits with its code. The child is a process of its own (its own
exit code, file descriptors 1 and 2, state), so a call behaves as a fresh ``python -m toolbench_lib``
except for what is read at import time: a call whose environment differs from the server's in such a
variable, or ``TOOLBENCH_TEST_FORK=0``, runs a plain subprocess instead."""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# Read when the CLI's modules are imported (the cache folder, Hugging Face's offline switch): a call that
# sets any of them otherwise than the server's environment cannot share its imports.
IMPORT_TIME = ("TOOLBENCH_CACHE", "HF_HUB_OFFLINE", "HF_HOME", "TRANSFORMERS_OFFLINE", "PYTHONPATH",
               "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_server: dict[str, object] = {}


def _run_child(request: dict) -> dict:
    """Fork one child for ``request`` and wait for it (killed past its timeout)."""
    out, err = (tempfile.TemporaryFile() for _ in range(2))  # noqa: SIM115 - closed below, after the child
    sys.stdout.flush(), sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: the call's process
        code = 1
        try:
            os.dup2(out.fileno(), 1), os.dup2(err.fileno(), 2)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.environ.clear()
            os.environ.update(request["env"])
            os.chdir(request["cwd"])
            sys.argv = ["toolbench_lib", *request["args"]]
            import runpy

            runpy.run_module("toolbench_lib", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - as Python itself: the traceback on stderr, exit 1
            import traceback

            traceback.print_exc()
        finally:
            atexit._run_exitfuncs()  # as an interpreter's exit runs them (logging's flush among them)
            sys.stdout.flush(), sys.stderr.flush()
            os._exit(code)
    timed_out = False
    try:
        import signal
        import time

        deadline = time.monotonic() + request["timeout"]
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                done, timed_out = os.waitpid(pid, 0), True
                break
            time.sleep(0.02)
        rc = os.waitstatus_to_exitcode(done[1])
    finally:
        texts = []
        for f in (out, err):
            f.seek(0)
            texts.append(f.read().decode("utf-8", errors="replace"))
            f.close()
    return {"rc": rc, "stdout": texts[0], "stderr": texts[1], "timed_out": timed_out}


def serve() -> None:
    """The server: import the CLI as ``python -m`` would find it (the working folder first on the path), then
    answer one JSON request per line of stdin with one line."""
    sys.path[0] = os.getcwd()
    import toolbench_lib.cli  # noqa: F401 - the imports every child shares

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        print(json.dumps(_run_child(json.loads(line))), flush=True)


def _start(env: dict[str, str]) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=env, cwd=str(Path.cwd()))
    if json.loads(proc.stdout.readline() or "{}").get("ready") is not True:
        raise RuntimeError("the CLI fork server did not start")
    atexit.register(proc.kill)
    _server.update(proc=proc, env=dict(env))
    return proc


def run_cli(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m toolbench_lib *args`` with ``env`` (the whole environment), as :func:`subprocess.run`
    with ``capture_output=True, text=True`` returns it; forked from the server started by the first call."""
    command = [sys.executable, "-m", "toolbench_lib", *args]
    proc = _server.get("proc")
    if os.environ.get("TOOLBENCH_TEST_FORK") == "0" or (
            proc is not None and any(env.get(k) != _server["env"].get(k) for k in IMPORT_TIME)):
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    if proc is None or proc.poll() is not None:
        proc = _start(env)
    request = {"args": args, "env": env, "cwd": str(Path.cwd()), "timeout": timeout}
    proc.stdin.write(json.dumps(request) + "\n")
    proc.stdin.flush()
    reply = json.loads(proc.stdout.readline())
    if reply["timed_out"]:
        raise subprocess.TimeoutExpired(command, timeout, reply["stdout"], reply["stderr"])
    return subprocess.CompletedProcess(command, reply["rc"], reply["stdout"], reply["stderr"])


if __name__ == "__main__":
    serve()
