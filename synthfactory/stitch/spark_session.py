"""A Spark session configured for the stitch job.

``local[*]`` by default; ``--master k8s://...`` (with the worker image from docker/)
runs the same job on Kubernetes. Python workers use this interpreter so they see the
same packages as the driver.
"""

from __future__ import annotations

import os
import sys


def spark_session(master: str, app_name: str = "synthfactory-stitch", shuffle_partitions: int = 8):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.memory", os.environ.get("SYNTHFACTORY_SPARK_DRIVER_MEMORY", "1g"))
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
