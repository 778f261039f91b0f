"""The notebooks' kernels: this interpreter's kernelspec, quiet IPC kernel managers, their stop on signals."""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from jupyter_client import AsyncKernelManager

KERNEL_NAME = "toolbench"


@contextmanager
def environment(**values: str) -> Iterator[None]:
    """Set environment variables (seen by the kernels started meanwhile), restored afterwards."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def interpreter_kernel() -> Iterator[str]:
    """Make the ``toolbench`` kernel (this interpreter) visible to Jupyter for the duration, from a temporary
    folder put first on ``JUPYTER_PATH`` (nothing written elsewhere); yields its name."""
    with tempfile.TemporaryDirectory(prefix="toolbench-kernel-") as tmp:
        spec_dir = Path(tmp) / "kernels" / KERNEL_NAME
        spec_dir.mkdir(parents=True)
        spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": f"Python ({KERNEL_NAME}, {Path(sys.executable).parent.parent.name})",
                "language": "python", "metadata": {"debugger": True}}
        (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1))
        previous = os.environ.get("JUPYTER_PATH")
        with environment(JUPYTER_PATH=os.pathsep.join([tmp, *([previous] if previous else [])])):
            yield KERNEL_NAME


@functools.cache
def quiet_kernel_manager() -> type:
    """A kernel manager for papermill that keeps the console quiet: IPC sockets in a private temporary folder
    (no TCP warning) and no SIGINT before a shutdown (which makes ipykernel log a ``KeyboardInterrupt``)."""
    class QuietKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.transport = "ipc"
            self._socket_dir = tempfile.mkdtemp(prefix="tbk-")  # short: unix socket paths are limited
            self.ip = os.path.join(self._socket_dir, "k")
            KERNELS.add(self)  # stop_kernels() reaches it when the run is interrupted

        async def _async_interrupt_kernel(self) -> None:
            if self.shutting_down:
                return
            await super()._async_interrupt_kernel()

        async def _async_cleanup_resources(self, restart: bool = False) -> None:
            await super()._async_cleanup_resources(restart)
            if not restart:
                shutil.rmtree(self._socket_dir, ignore_errors=True)

    return QuietKernelManager


# The kernel managers of this process's notebooks (:func:`quiet_kernel_manager`), for :func:`stop_kernels`.
KERNELS: weakref.WeakSet = weakref.WeakSet()


class Terminated(KeyboardInterrupt):
    """SIGTERM stopped the run (its kernels stopped, their temporary files removed): an interruption."""


def stop_kernels() -> None:
    """Kill every notebook kernel of this process (its whole process group) and remove its socket folder
    and connection file."""
    for km in list(KERNELS):
        provisioner = getattr(km, "provisioner", None)
        process = getattr(provisioner, "process", None)
        if process is not None and process.poll() is None:
            with suppress(OSError):
                os.killpg(getattr(provisioner, "pgid", None) or process.pid, signal.SIGKILL)
        with suppress(Exception):
            km.cleanup_connection_file()
        shutil.rmtree(km._socket_dir, ignore_errors=True)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """While the block runs (in the main thread), SIGINT and SIGTERM :func:`stop_kernels`, quiet the logs
    and raise ``KeyboardInterrupt`` or :class:`Terminated`; an ignored signal stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame) -> None:
        stop_kernels()
        for name in ("papermill", "nbclient", "asyncio", "traitlets"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        raise Terminated("terminated") if signum == signal.SIGTERM else KeyboardInterrupt()

    previous = {s: h for s in (signal.SIGINT, signal.SIGTERM)
                if (h := signal.getsignal(s)) not in (signal.SIG_IGN, None)}  # None: not from Python
    for s in previous:
        signal.signal(s, stop)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
