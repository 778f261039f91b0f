"""Check in a child process that the installed llama.cpp runs on this CPU (a build using instructions the
CPU lacks dies with SIGILL); ``python -m toolbench_lib.llm.cpu_check`` exits 1 when it cannot run here."""

from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

FLAGS_OF_INTEREST = ("sse4_2", "avx", "avx2", "fma", "f16c", "bmi2", "avx_vnni", "avx512f", "avx512bw",
                     "avx512vl", "avx512_vnni", "avx512_bf16",
                     "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16")

SYSTEM_INFO_SNIPPET = "import llama_cpp; print(llama_cpp.llama_print_system_info().decode())"


@dataclass
class ChildResult:
    """What a child interpreter printed and how it ended."""

    returncode: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        """One line: ``ok``, ``exit N: <last stderr line>`` or ``killed by SIGILL (...)``."""
        if self.returncode == 0:
            return "ok"
        if self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            hint = (" (an instruction this CPU lacks: rebuild with `make install-local`)"
                    if name == "SIGILL" else "")
            return f"killed by {name}{hint}"
        return f"exit {self.returncode}: {(self.stderr.strip().splitlines() or [''])[-1]}"


def run_isolated(code: str, timeout: float = 600.0) -> ChildResult:
    """Run ``code`` with this interpreter in a child process; a crash there cannot kill the caller."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    return ChildResult(proc.returncode, proc.stdout, proc.stderr)


def host_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU feature flags the kernel reports (empty where there is no /proc/cpuinfo)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return set()
    flags = (line.split(":", 1)[1] for line in text.splitlines() if line.startswith("flags"))
    return set(next(flags, "").split())


def main() -> int:
    flags = host_flags()
    print("CPU reports:", " ".join(f for f in FLAGS_OF_INTEREST if f in flags) or "(unknown)")
    result = run_isolated(SYSTEM_INFO_SNIPPET, timeout=120)
    if result.returncode != 0:
        print(f"llama.cpp cannot run on this CPU: {result.describe()}", file=sys.stderr)
        return 1
    print("llama.cpp built with:", result.stdout.strip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
