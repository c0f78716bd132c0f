"""How long the DAG files take to parse, beyond Airflow's own import, and whether any
heavy engine library got imported. Run with the Airflow venv:

    .venv/bin/python scripts/dag_parse_time.py [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HEAVY = ("vllm", "torch", "pyspark", "ray", "grain", "transformers")
DAGS = Path(__file__).resolve().parent.parent / "dags"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    started = time.perf_counter()
    import airflow.providers.cncf.kubernetes.operators.pod  # noqa: F401  (Airflow's own cost)
    import airflow.sdk  # noqa: F401
    from airflow.dag_processing.dagbag import DagBag

    airflow_import = time.perf_counter() - started
    per_file: dict[str, float] = {}
    first_parse: dict[str, float] = {}
    errors: dict = {}
    for path in sorted(DAGS.glob("*.py")):
        times = []
        for _ in range(args.repeat):  # the first parse also pays for our own imports
            start = time.perf_counter()
            bag = DagBag(dag_folder=str(path))
            times.append(time.perf_counter() - start)
            errors.update(bag.import_errors)
        first_parse[path.name] = round(times[0], 4)
        per_file[path.name] = round(min(times), 4)
    result = {"airflow_import_s": round(airflow_import, 3), "dag_files_s": per_file,
              "first_parse_s": first_parse,
              "import_errors": errors, "heavy_modules": [m for m in HEAVY if m in sys.modules]}
    if args.json:
        print(json.dumps(result))
        return
    print(f"Airflow import: {airflow_import:.2f} s")
    for name, seconds in per_file.items():
        print(f"  {name:<28} first {first_parse[name] * 1000:7.1f} ms (with operators/, "
              f"plugins/ imports), then {seconds * 1000:7.1f} ms")
    print(f"import errors: {errors or 'none'}; heavy modules loaded: "
          f"{result['heavy_modules'] or 'none'}")


if __name__ == "__main__":
    main()
