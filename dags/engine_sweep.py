"""engine_sweep: measure vLLM engine configurations (or, against an OpenAI-compatible
endpoint, the client's max_in_flight) on a sample prompt shard; write the decision next
to the model, where synthetic_rephrase's workers read it, when a candidate beats the
defaults by more than the rounds' spread.

Thin by design: one GPU-pool step running ``synthfactory sweep`` through the runner;
the command itself runs each configuration in its own process inside that step.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from synthfactory.contract import engine_names, steps
from synthfactory_airflow.operators.runners import runner_for
from synthfactory_airflow.operators.settings import Settings

SETTINGS = Settings()
RUNNER = runner_for(SETTINGS)
Step = RUNNER.step_class()

# A retry of the task resumes the same folder (finished configurations are skipped);
# a new run gets its own folder unless sweep_name names an earlier one.
OUT = ("{{ params.output_root }}/engine_sweep/"
       "{{ (params.sweep_name or run_id) | replace(':', '') | replace('+', '_') }}")

DOC = """
### engine_sweep

Grid-searches vLLM engine arguments (`max_num_seqs`, `max_num_batched_tokens`,
`gpu_memory_utilization`, `dtype`, `enable_prefix_caching`, `speculative_config`,
`enforce_eager`, ...) on a sample of one prompt shard, on the GPU pool.

* **grid**: a list of engine-argument objects, or `{param: [values]}` for every
  combination. The built-in defaults (`{}`) are always measured as the baseline.
* Every entry is scaled down by **safety_margin** before it is measured: what is
  measured is what would be written. GPU-only entries are skipped on the CPU build.
* Successive halving: the candidates and the defaults are measured in alternating
  rounds; a candidate wins only when its median beats the defaults' by more than the
  rounds' spread, otherwise the defaults stay (the log says so in one line).
* Each configuration runs in its own process after a warm-up; out-of-memory and invalid
  combinations are recorded as failed and the sweep goes on.
* Results: `{output_root}/engine_sweep/{run}/results.parquet`, `sweep.png`,
  `winner.json` (medians, spreads and rounds behind the decision), the table in the log.
* With **apply**, the decision is written to `{model}/synthfactory-engine.json`: the
  default engine arguments of `synthetic_rephrase` for that model (its `engine_args`
  param still overrides them).
* **engine** = endpoint: the sweep runs against the OpenAI-compatible server of
  **endpoint_conn_id** and its grid varies `max_in_flight` (e.g.
  `{"max_in_flight": [32, 64, 128]}`); the decision goes to `winner.json` only.

See docs/sweep.md.
"""

params = {
    "shard": Param(type="string", minLength=1,
                   description="prompt shard URL (stitch output: .../prompts/shard-00000.parquet)"),
    "model": Param(str(SETTINGS.home) + "/var/models/SmolLM2-135M-Instruct", type="string",
                   minLength=1, description="model folder; the winner is written inside it"),
    "grid": Param({"max_num_seqs": [64, 128, 256], "max_num_batched_tokens": [4096, 8192]},
                  type=["object", "array"], minProperties=1, minItems=1,
                  description="list of engine-argument objects, or {param: [values]}"),
    "sample_rows": Param(32, type="integer", minimum=1, maximum=100000,
                         description="prompt rows measured per configuration"),
    "max_new_tokens": Param(128, type="integer", minimum=1, maximum=8192),
    "gpu_hour_usd": Param(2.5, type="number", minimum=0,
                           description="price of one GPU-hour, for cost per billion tokens"),
    "safety_margin": Param(0.1, type="number", minimum=0, exclusiveMaximum=1,
                           description="fraction the winner's batch and memory knobs back off"),
    "apply": Param(True, type="boolean",
                   description="write the winner to {model}/synthfactory-engine.json"),
    "output_root": Param(SETTINGS.url("var", "data"), type="string", minLength=1,
                         description="where sweep folders are written (file:// or s3://)"),
    "engine": Param(engine_names.VLLM, type="string", enum=engine_names.form_choices(),
                    values_display=engine_names.form_labels(),
                    description="vllm: vLLM in the task; endpoint: the OpenAI-compatible "
                                "server of endpoint_conn_id (grid: max_in_flight)"),
    "endpoint_conn_id": Param(None, type=["null", "string"],
                              description="engine = endpoint: Airflow connection of the "
                                          "server (host: its URL, password: its API key, "
                                          "extra.model: the served model)"),
    "sweep_name": Param("", type="string", pattern=r"^[A-Za-z0-9._-]*$",
                        description="folder name to resume into (default: the run id)"),
}

with DAG(
    dag_id="engine_sweep",
    schedule=None,
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params=params,
    doc_md=DOC,
    tags=["synthfactory"],
    default_args={"owner": "synthfactory"},
) as dag:
    Step(
        task_id="sweep_engine_args",
        arguments=steps.argv("sweep", {"--out": OUT}),  # the steps table's flags
        **RUNNER.step_kwargs(steps.SWEEP.kind, "engine_sweep"),
        **RUNNER.endpoint_kwargs(),
    )
