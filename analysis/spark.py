"""The pipeline's SparkSession: local by default, a cluster when given ``spark://``."""
from __future__ import annotations

import os

from pyspark.sql import SparkSession


def session(master: str = "local[*]", app: str = "kafkasim-analyze") -> SparkSession:
    """A SparkSession with the pipeline's settings; reuses the active one if there is one."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    cores = os.cpu_count() or 2
    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(max(2, 2 * cores)))
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", os.environ.get("KAFKASIM_SPARK_DRIVER_MEMORY", "4g"))
               # Spark's generated code has methods above HotSpot's 8000-byte JIT limit: left interpreted, the
               # checkers' stages ran about 15 % slower (bench/analysis.py)
               .config("spark.driver.extraJavaOptions", "-XX:-DontCompileHugeMethods")
               .config("spark.sql.execution.arrow.pyspark.enabled", "false")
               # a JSON object with a repeated key keeps the last, as Python's dict (offsets maps)
               .config("spark.sql.mapKeyDedupPolicy", "LAST_WIN"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
