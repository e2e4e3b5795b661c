"""The SparkSession of a bench run: local[*] by default, or a cluster; data-source registration.

Before the JVM starts: ``PYSPARK_PYTHON`` = this interpreter (PySpark would otherwise start
workers with ``python3`` from PATH), ``SPARK_LOCAL_IP=127.0.0.1`` for local masters, and the repo
root on ``PYTHONPATH`` so local Python workers import ``bench`` and ``pybroker``. Under
``spark-submit`` (``PYSPARK_GATEWAY_PORT`` set) the JVM already runs: the master and configs come
from the command line and only the session is fetched.

For non-local masters and under spark-submit the ``bench`` package is zipped and shipped with
``addPyFile`` (executors need ``bench.spark.*`` to unpickle the tasks and the data source). ``pybroker`` has a native
module, so it must be installed on the workers (a zip cannot carry it).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BENCH_DIR = REPO / "bench"
FORMATS: dict[str, str | None] = {}  # what register_sources found: format -> None or the error


def under_spark_submit() -> bool:
    """True when this driver was started by spark-submit (the JVM gateway already exists)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def is_local(master: str | None) -> bool:
    return master is None or master.startswith("local")


def prepare_environment(master: str | None) -> None:
    """Environment the JVM and its Python workers inherit; must run before the JVM starts."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if is_local(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(REPO) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), *paths])


def zip_bench(dest_dir: Path) -> Path:
    """``bench`` (Python files only) as a zip for ``addPyFile``."""
    out = dest_dir / "bench-auto.zip"  # not bench.zip: a --py-files bench.zip may be registered
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(BENCH_DIR.rglob("*.py")):
            z.write(path, path.relative_to(REPO).as_posix())
    return out


def build(
    master: str | None = "local[*]",
    app_name: str = "pybroker-bench",
    driver_memory: str = "2g",
    conf: dict[str, str] | None = None,
    log_level: str = "ERROR",
) -> Any:
    """The SparkSession, with both data sources registered where available."""
    submitted = under_spark_submit()
    prepare_environment(None if submitted else master)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if not submitted:
        builder = builder.master(master or "local[*]").config("spark.driver.memory", driver_memory)
        builder = builder.config("spark.ui.enabled", "false")
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    builder = builder.config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    shipped = spark.sparkContext.getConf().get("spark.submit.pyFiles", "")
    if (submitted or not is_local(spark.sparkContext.master)) and "bench" not in shipped:
        # executors (and, under spark-submit, the JVM's Python workers) may not see this checkout
        zip_dir = Path(tempfile.mkdtemp(prefix="bench-zip-"))
        atexit.register(shutil.rmtree, zip_dir, True)
        spark.sparkContext.addPyFile(str(zip_bench(zip_dir)))
    register_sources(spark)
    return spark


def register_sources(spark: Any) -> dict[str, str | None]:
    """Register ``benchconfluent`` and, if importable, ``pybroker``; {format: error or None}."""
    from bench.spark.confluent_source import FORMAT, ConfluentKafkaSource
    from bench.spark.producers import pybroker_spark_available

    spark.dataSource.register(ConfluentKafkaSource)
    status: dict[str, str | None] = {FORMAT: None}
    error = pybroker_spark_available()
    if error is None:
        import pybroker.spark

        try:
            pybroker.spark.register(spark)
        except Exception as exc:  # the data source is being written concurrently
            error = f"{type(exc).__name__}: {exc}"
    status["pybroker"] = error
    FORMATS.clear()
    FORMATS.update(status)
    return status


def versions(spark: Any) -> dict[str, str]:
    """Spark, Java, Python and library versions of the driver."""
    import pyarrow
    import pyspark

    out = {
        "spark": spark.version,
        "pyspark": pyspark.__version__,
        "pyarrow": pyarrow.__version__,
        "master": spark.sparkContext.master,
        "default_parallelism": str(spark.sparkContext.defaultParallelism),
    }
    try:
        out["java"] = spark.sparkContext._jvm.System.getProperty("java.version")
    except Exception:  # not every gateway exposes the JVM (Spark Connect)
        pass
    try:
        import confluent_kafka

        out["confluent_kafka"] = confluent_kafka.__version__
        out["librdkafka"] = confluent_kafka.libversion()[0]
    except ImportError:
        pass
    return out
