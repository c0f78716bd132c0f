"""What this process runs on, as the engine's choices and every figure need it.

The CPU's vector extensions decide whether bfloat16 is native (AVX512-BF16 or AMX-BF16)
or emulated: emulated, vLLM's CPU build ran 4.2x slower in bfloat16 than in float32 on
an AVX2-only EPYC (docs/environment.md). A GPU's compute capability decides the same for
CUDA (bfloat16 from 8.0, Ampere). Standard library only: benchmarks and the summary
import it without torch; the GPU probe imports torch lazily.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

# The vector extensions every figure states and the dtype choice reads, in this order.
ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
# bfloat16 tensor cores arrived with Ampere (compute capability 8.0).
GPU_BF16_CAPABILITY = (8, 0)
# Set to a comma-separated flag list (or "none") to describe another CPU: tests and
# what-if checks; never set by the package itself.
CPU_FLAGS_ENV = "SYNTHFACTORY_CPU_FLAGS"


@lru_cache(maxsize=1)
def _proc_cpu_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_flags() -> frozenset[str]:
    """The CPU's flags (``/proc/cpuinfo``), or those ``SYNTHFACTORY_CPU_FLAGS`` names."""
    override = os.environ.get(CPU_FLAGS_ENV)
    if override is not None:
        return frozenset(f.strip() for f in override.split(",") if f.strip() not in ("", "none"))
    return _proc_cpu_flags()


def isa(flags: frozenset[str] | None = None) -> str:
    """The ISA flags this CPU has, of ``ISA_FLAGS``, comma-joined (``avx2``,
    ``avx2,avx512f,avx512_bf16,amx_bf16``), or ``none``."""
    flags = cpu_flags() if flags is None else flags
    return ",".join(f for f in ISA_FLAGS if f in flags) or "none"


def native_cpu_bf16(flags: frozenset[str] | None = None) -> bool:
    flags = cpu_flags() if flags is None else flags
    return any(f in flags for f in NATIVE_BF16_FLAGS)


@dataclass(frozen=True)
class Hardware:
    """The facts the engine's defaults and a sweep winner depend on: ``device`` is
    "cpu" or "cuda"; the CPU's ISA flags, or the GPU's name and compute capability."""

    device: str
    isa: str = ""
    gpu_name: str = ""
    capability: str = ""  # "8.0"

    def record(self) -> dict:
        if self.device == "cuda":
            return {"device": "cuda", "gpu_name": self.gpu_name,
                    "capability": self.capability}
        return {"device": "cpu", "isa": self.isa}

    def describe(self) -> str:
        if self.device == "cuda":
            return f"{self.gpu_name} (compute capability {self.capability})"
        return f"a CPU with {self.isa}"

    @classmethod
    def from_record(cls, record: object) -> Hardware | None:
        """The hardware a record names, or None when it is not one."""
        if not isinstance(record, dict):
            return None
        if record.get("device") == "cuda":
            return cls("cuda", gpu_name=str(record.get("gpu_name", "")),
                       capability=str(record.get("capability", "")))
        if record.get("device") == "cpu" and isinstance(record.get("isa"), str):
            return cls("cpu", isa=record["isa"])
        return None


def cpu_hardware() -> Hardware:
    return Hardware("cpu", isa=isa())


def cuda_hardware(index: int = 0) -> Hardware:
    import torch

    major, minor = torch.cuda.get_device_capability(index)
    return Hardware("cuda", gpu_name=torch.cuda.get_device_name(index),
                    capability=f"{major}.{minor}")


def current(cuda: bool) -> Hardware:
    return cuda_hardware() if cuda else cpu_hardware()


def default_dtype(hardware: Hardware) -> tuple[str, str]:
    """The dtype to run on ``hardware`` and why, in one line."""
    if hardware.device == "cuda":
        major, _, minor = hardware.capability.partition(".")
        try:
            capability = (int(major), int(minor or 0))
        except ValueError:
            capability = (0, 0)
        if capability >= GPU_BF16_CAPABILITY:
            return "bfloat16", (f"bfloat16: {hardware.gpu_name} has native bfloat16 "
                                f"(compute capability {hardware.capability})")
        return "float16", (f"float16: {hardware.gpu_name} has no native bfloat16 "
                           f"(compute capability {hardware.capability} < 8.0)")
    flags = frozenset(hardware.isa.split(","))
    if native_cpu_bf16(flags):
        native = ",".join(f for f in NATIVE_BF16_FLAGS if f in flags)
        return "bfloat16", f"bfloat16: this CPU has native bfloat16 ({native})"
    return "float32", f"float32: this CPU has no native bfloat16 ({hardware.isa})"


def load_line() -> str:
    """``uptime``'s three load averages, for a benchmark's line."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "load n/a"
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"
