"""``--engine vllm``: vLLM's offline engine in this process (``engines.VllmEngine``).

vLLM itself is imported only when an engine is built or a trial warms one up: the
Airflow layer and ``--help`` import this module, never vLLM or torch.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from synthfactory.contract.engine_names import VLLM
from synthfactory.errors import SynthfactoryError
from synthfactory.rephrase.engine_args import TUNED_FILE, read_tuned
from synthfactory.rephrase.engine_choice import check_window
from synthfactory.rephrase.engine_registry.base import EngineKind, describe
from synthfactory.rephrase.vllm_checks import check_engine_args


class OfflineVllm(EngineKind):
    name = VLLM
    commands = {"rephrase": "vLLM's offline engine in this process",
                "sweep": "vLLM's offline engine, one process per trial",
                "judge": "vLLM's offline engine in this process (--model: the judge)"}
    local_devices = True

    def check_engine_args(self, given: dict, model: str, window: int | None) -> dict | None:
        """vLLM's own definitions, before any shard is read or loaded; one window,
        stitch to engine."""
        tuned = read_tuned(model)
        check_window(given, window, "--engine-args")
        check_engine_args(tuned["engine_args"] if tuned else {}, f"{Path(model) / TUNED_FILE}")
        check_engine_args(given, "--engine-args")
        return tuned

    def build(self, spec):
        from synthfactory.rephrase import engines  # looked up now: tests stand in for it

        try:
            return engines.VllmEngine(spec.model, spec.engine_args, spec.sampling,
                                      tuned=spec.tuned, window=spec.window)
        except (ValueError, TypeError) as exc:  # vLLM's config checks, pydantic's too
            raise SynthfactoryError(
                f"--model {spec.model} with engine arguments {json.dumps(spec.engine_args)}: "
                f"vLLM refused to start the engine ({describe(exc)})") from exc

    def replay_basis(self, spec):
        """The engine's arguments as it will choose them on this host (the dtype among
        them), the weights' and tokenizer's content hash, and whether it takes a seed per
        request (on a GPU: engines.VllmEngine)."""
        from synthfactory import hardware
        from synthfactory.rephrase.engine_choice import choose
        from synthfactory.rephrase.engines import has_cuda
        from synthfactory.rephrase.replay.key import basis, model_identity

        cuda = has_cuda()
        args = choose(hardware.current(cuda), spec.engine_args, spec.tuned, spec.model,
                      spec.window).args
        return basis(self.name, model_identity(spec.model, args.get("revision")), args,
                     seeded=cuda)

    def default_gpus_per_replica(self) -> float:
        from synthfactory.rephrase.engines import has_cuda

        return 1.0 if has_cuda() else 0.0

    def for_replica(self, spec, gpus: float):
        """The executor backend is chosen, not left to vLLM's guess inside a Ray worker:
        one GPU runs in-process ("uni"); several use vLLM's own processes ("mp") on the
        GPUs Ray gave this replica, not a nested Ray placement group."""
        args = dict(spec.engine_args)
        args.setdefault("tensor_parallel_size", max(1, int(gpus)))
        args.setdefault("distributed_executor_backend",
                        "uni" if args["tensor_parallel_size"] == 1 else "mp")
        return replace(spec, engine_args=args)

    def check_replica_devices(self, gpu_ids: list, index: int) -> None:
        from synthfactory.rephrase.engines import has_cuda

        if not has_cuda():
            raise SynthfactoryError(
                f"replica {index}: Ray assigned GPU(s) {gpu_ids} but CUDA is not visible "
                "in this process (driver, CUDA_VISIBLE_DEVICES or device plugin); refusing "
                "to run the CPU engine on a GPU slot")

    # -- the sweep: engine arguments, one engine per trial process ----------------------
    def check_grid_entry(self, config: dict, where: str) -> None:
        check_engine_args(config, where)

    def trial_engine(self, spec: dict):
        """The worker's own engine: built-in defaults under the configuration, the chat
        template through ``enqueue_chat``."""
        from synthfactory.rephrase.engines import VllmEngine

        return VllmEngine(spec["model"], spec["config"], spec["sampling"])

    @contextmanager
    def warm_up_budget(self, engine, max_tokens: int):
        from vllm import SamplingParams

        timed_params = engine.params
        engine.params = SamplingParams(**{**engine.sampling, "max_tokens": max_tokens})
        try:
            yield
        finally:
            engine.params = timed_params

    def effective(self, engine) -> dict:
        """What vLLM actually used (its own defaults filled in), for the report."""
        try:
            config = engine.llm.llm_engine.vllm_config
            return {"max_num_seqs": config.scheduler_config.max_num_seqs,
                    "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
                    "gpu_memory_utilization": config.cache_config.gpu_memory_utilization,
                    "dtype": str(config.model_config.dtype).removeprefix("torch."),
                    "enable_prefix_caching": config.cache_config.enable_prefix_caching}
        except AttributeError:  # another vLLM version: the report just shows less
            return {}
