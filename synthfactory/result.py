"""How a step hands its summary to the orchestrator.

The same argv runs as a local subprocess and in a Kubernetes pod, so the summary goes
to one place both can read: ``$SYNTHFACTORY_RESULT_FILE`` when set (the local runner
sets a temp file; the pod spec sets ``/airflow/xcom/return.json``, which the
KubernetesPodOperator's xcom sidecar reads), and always the last line of stdout.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from synthfactory.contract import RESULT_FILE_ENV


def publish(summary: dict) -> None:
    text = json.dumps(summary, sort_keys=True, default=str)
    target = os.environ.get(RESULT_FILE_ENV)
    if target:
        path = Path(target)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    print(text, flush=True)
