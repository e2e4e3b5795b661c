"""``python -m bench``: the Spark-driven load replay (workload, record, replay, gen-trace).

Everything is in ``bench.spark.cli``; this module only hands it the command line.
"""

from __future__ import annotations

from bench.spark.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
