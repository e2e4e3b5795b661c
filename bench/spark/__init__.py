"""Spark-driven load replay for Kafka-compatible brokers (``python -m bench``).

Modules, one concern each:

* ``cli``        the command line (``workload``, ``record``, ``replay``, ``gen-trace``, ``list``);
* ``run``        a script entry for ``spark-submit`` (``python -m`` is not usable there);
* ``session``    the SparkSession (local[*] or a cluster) and the data-source registration;
* ``workloads``  OpenMessaging-Benchmark-like workload specs and the built-in presets;
* ``keys``       key distributions (none, uniform, zipf, hot, round robin) in SQL and numpy;
* ``generate``   the data: JVM-generated DataFrames and Python-generated Arrow batches in tasks;
* ``producers``  the clients used inside tasks (pybroker's ArrowProducer, confluent-kafka);
* ``confluent_source``  a Spark data source backed by confluent-kafka (the ``--client confluent``
  variant and the stand-in reader);
* ``runner``     one scenario against several brokers, alternating runs, and one run's measurements;
* ``scenarios``  workloads (batch / tasks / stream jobs) and trace replays as run-loop scenarios;
* ``targets``    the brokers of one invocation (launched pybroker/Tansu, or any bootstrap);
* ``monitor``    throughput over time (high watermarks) and the progress line;
* ``latency``    the end-to-end latency consumer (a child process);
* ``admin_ops``  topics, DeleteRecords and retention-sweep latencies (pybroker's admin client);
* ``trace``      record a topic into Parquet, generate, replay and verify a trace;
* ``results``    JSON and markdown results, machine info and versions;
* ``plots``      the PNG plots (matplotlib);
* ``stats``      percentiles and small helpers.
"""
