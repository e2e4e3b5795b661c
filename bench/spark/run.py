"""Script entry for ``spark-submit`` (which cannot run ``python -m``): the same CLI as
``python -m bench``.

    spark-submit --master spark://HOST:7077 --py-files bench.zip bench/spark/run.py workload batch-100b

The repo root (two levels up) is put on ``sys.path`` so the driver imports ``bench`` and
``pybroker`` from this checkout; executors get ``bench`` from ``--py-files`` (or from
``addPyFile``, which ``bench.spark.session`` does for non-local masters) and need ``pybroker``
installed. See bench/README.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.spark.cli import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
