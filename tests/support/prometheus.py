"""Debian's Pushgateway and Prometheus for the metrics tests, on 127.0.0.1 on free ports,
stopped at the end; missing binaries skip, or fail under CI=true (tests/support/binaries.py).
And the series as Prometheus would scrape them from the Pushgateway."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.support.binaries import required_binary
from tests.support.ports import free_port

# Debian's Pushgateway persists its groups by default (--persistence.file=/var/lib/prometheus/
# pushgateway.data), one file for every Pushgateway of the machine: each test's would start
# with the groups the last one (another test, another session) left there
MEMORY_ONLY = ("--persistence.file=",)


def _wait_ready(url: str, proc: subprocess.Popen, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{url}/-/ready", timeout=2)
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                tail = log.read_text()[-2000:] if log and log.exists() else ""
                raise AssertionError(f"{what} did not start at {url}\n{tail}") from None
            time.sleep(0.2)


@contextlib.contextmanager
def pushgateway() -> Iterator[str]:
    """A Pushgateway, its groups in memory only; yields its URL."""
    binary = required_binary("prometheus-pushgateway", "prometheus-pushgateway")
    port = free_port()
    proc = subprocess.Popen([binary, f"--web.listen-address=127.0.0.1:{port}", *MEMORY_ONLY],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc, "the Pushgateway")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextlib.contextmanager
def prometheus(scrape: str, workdir: Path, interval_s: int = 1) -> Iterator[str]:
    """A Prometheus scraping the Pushgateway at ``scrape`` (a URL) every ``interval_s`` seconds,
    as deploy/prometheus/prometheus.yml's pushgateway job does (honor_labels); yields its
    URL."""
    binary = required_binary("prometheus", "prometheus")
    port = free_port()
    target = urllib.parse.urlsplit(scrape).netloc
    config = workdir / "prometheus.yml"
    config.write_text(
        "global:\n"
        f"  scrape_interval: {interval_s}s\n"
        f"  evaluation_interval: {interval_s}s\n"
        "scrape_configs:\n"
        "  - job_name: pushgateway\n"
        "    honor_labels: true\n"
        "    static_configs:\n"
        f"      - targets: ['{target}']\n")
    log = workdir / "prometheus.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc, "Prometheus", log)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _api(url: str, path: str, params: dict | list) -> dict | list:
    qs = urllib.parse.urlencode(params)
    with urllib.request.urlopen(f"{url}/api/v1/{path}?{qs}", timeout=30) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return body["data"]


def query(url: str, expr: str, at: float | None = None) -> list[dict]:
    """An instant query through Prometheus's HTTP API, now or at ``at`` (Unix seconds): its
    result vector."""
    return _api(url, "query", {"query": expr, **({"time": f"{at:.3f}"} if at else {})})["result"]


def query_range(url: str, expr: str, start: float, end: float, step: float = 1) -> list[dict]:
    """A range query (``expr`` evaluated every ``step`` seconds from ``start`` to ``end``):
    its result matrix, each series with its ``values`` [[t, "v"], ...]."""
    return _api(url, "query_range", {"query": expr, "start": f"{start:.3f}",
                                     "end": f"{end:.3f}", "step": str(step)})["result"]


def series(url: str, match: str, start: float, end: float) -> list[dict[str, str]]:
    """The label sets of every series matching ``match`` that Prometheus stored between
    ``start`` and ``end``."""
    return _api(url, "series", [("match[]", match), ("start", f"{start:.3f}"),
                                ("end", f"{end:.3f}")])


def alert_rules(path: Path) -> dict[str, str]:
    """{alert name: its expression} of a Prometheus rule file."""
    import yaml

    groups = yaml.safe_load(path.read_text())["groups"]
    return {rule["alert"]: rule["expr"].strip() for group in groups
            for rule in group["rules"] if "alert" in rule}


def have_binaries() -> bool:
    """Whether this machine has Debian's Prometheus and Pushgateway (a fixture that must
    not skip asks this first; the tests that read them skip, or fail under CI=true,
    through ``required_binary``)."""
    import shutil

    return bool(shutil.which("prometheus") and shutil.which("prometheus-pushgateway"))


def scraped(gateway: str, name: str) -> dict[tuple, float]:
    """{labels: value} of one metric as the Pushgateway serves it to Prometheus."""
    text = urllib.request.urlopen(f"{gateway}/metrics", timeout=5).read().decode()
    return {tuple(sorted(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples
            if s.name == name}


def matching(series: dict[tuple, float], **labels: str) -> list[float]:
    """The values of the series carrying every one of ``labels``."""
    return [v for key, v in series.items() if labels.items() <= dict(key).items()]


def dashboard_targets(path: Path) -> list[tuple[str, str]]:
    """("panel title refId", query) of every target of a Grafana dashboard."""
    dashboard = json.loads(path.read_text())
    return [(f"{panel['title']} {target['refId']}", target["expr"])
            for panel in dashboard["panels"] for target in panel["targets"]]


def substitute(expr: str, values: dict[str, str]) -> str:
    """A dashboard query with its template variables, as Grafana substitutes them."""
    import re

    return re.sub(r"\$\{?(\w+)\}?", lambda m: values[m.group(1)], expr)
