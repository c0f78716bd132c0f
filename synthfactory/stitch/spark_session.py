"""A Spark session configured for the stitch job.

``local[*]`` by default; ``spark://...`` (a standalone cluster) or ``k8s://...`` (client
mode in the stitch pod, executors as pods of the worker image) with the settings of
``spark_conf``. Python workers use this interpreter so they see the same packages as the
driver (in the worker image it is the same path in every pod).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from synthfactory.errors import RECORDS_ENV


def spark_session(master: str, app_name: str = "synthfactory-stitch", shuffle_partitions: int = 8,
                  conf: Mapping[str, str] | None = None):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.memory", os.environ.get("SYNTHFACTORY_SPARK_DRIVER_MEMORY", "1g"))
        .config("spark.sql.session.timeZone", "UTC")
        # a worker's error reaches the driver as text: ours carry their record in it
        .config(f"spark.executorEnv.{RECORDS_ENV}", "1")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
