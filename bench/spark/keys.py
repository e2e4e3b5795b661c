"""Key distributions of a workload, as Spark SQL expressions and as numpy/Arrow generators.

A distribution is written ``kind[:K[:param]]``:

* ``none``            null keys (the producer's partitioner spreads records; OMB's NO_KEY);
* ``uniform:K``       each record takes one of K keys uniformly at random (OMB's RANDOM_NANO);
* ``roundrobin:K``    key ``i mod K`` for the i-th record (OMB's KEY_ROUND_ROBIN);
* ``zipf:K``          Zipf-like with exponent ~1: key ``floor(exp(u * ln(K+1))) - 1`` for uniform
                      u, so P(k) ~ 1 / ((k+1) ln(K+1)); key 0 is the hottest;
* ``hot:K:F``         a fraction F (0..1) of records take key 0, the rest are uniform over K.

Key ``i`` is the bytes ``k`` + ``i`` zero-padded to 8 digits (``k00000042``), the same in SQL and
in Python, so JVM-generated and task-generated workloads produce the same keys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

KINDS = ("none", "uniform", "roundrobin", "zipf", "hot")


@dataclass(frozen=True)
class KeyDist:
    """A parsed key distribution."""

    kind: str = "none"
    count: int = 0
    hot_fraction: float = 0.0

    @classmethod
    def parse(cls, spec: str) -> KeyDist:
        """``none``, ``uniform:1000``, ``roundrobin:16``, ``zipf:10000``, ``hot:1000:0.5``."""
        parts = spec.strip().lower().split(":")
        kind = parts[0]
        if kind not in KINDS:
            raise ValueError(f"unknown key distribution {spec!r} (one of {', '.join(KINDS)})")
        if kind == "none":
            if len(parts) > 1:
                raise ValueError("key distribution 'none' takes no parameters")
            return cls()
        if len(parts) < 2 or not parts[1].isdigit() or int(parts[1]) < 1:
            raise ValueError(
                f"key distribution {spec!r}: give the number of keys, e.g. {kind}:1000"
            )
        count = int(parts[1])
        if kind == "hot":
            if len(parts) != 3:
                raise ValueError(f"key distribution {spec!r}: hot:K:FRACTION, e.g. hot:1000:0.5")
            frac = float(parts[2])
            if not 0.0 <= frac <= 1.0:
                raise ValueError(f"key distribution {spec!r}: the hot fraction must be in [0, 1]")
            return cls(kind, count, frac)
        if len(parts) > 2:
            raise ValueError(f"key distribution {spec!r}: too many parameters")
        return cls(kind, count)

    def __str__(self) -> str:
        if self.kind == "none":
            return "none"
        if self.kind == "hot":
            return f"hot:{self.count}:{self.hot_fraction:g}"
        return f"{self.kind}:{self.count}"

    # ----------------------------------------------------------------- SQL (JVM generation)

    def index_sql(self, id_col: str = "id") -> str | None:
        """SQL for the key index of row ``id_col``; None for null keys."""
        k = self.count
        if self.kind == "none":
            return None
        if self.kind == "uniform":
            return f"cast(floor(rand() * {k}) as bigint)"
        if self.kind == "roundrobin":
            return f"({id_col} % {k})"
        if self.kind == "zipf":
            return f"least(cast(floor(exp(rand() * {math.log(k + 1)!r})) as bigint) - 1, {k - 1})"
        return (
            f"(case when rand() < {self.hot_fraction!r} then 0L "
            f"else cast(floor(rand() * {k}) as bigint) end)"
        )

    def key_sql(self, id_col: str = "id") -> str:
        """SQL for the key column (binary, or a null binary)."""
        idx = self.index_sql(id_col)
        if idx is None:
            return "cast(null as binary)"
        return f"cast(concat('k', lpad(cast({idx} as string), 8, '0')) as binary)"

    # ----------------------------------------------------------------- Python (task generation)

    def indexes(self, start: int, n: int, rng: object) -> object:
        """numpy int64 key indexes of records ``start .. start+n-1``; ``rng`` a numpy Generator."""
        import numpy as np

        gen: np.random.Generator = rng  # type: ignore[assignment]
        k = self.count
        if self.kind == "uniform":
            return gen.integers(0, k, n, dtype=np.int64)
        if self.kind == "roundrobin":
            return np.arange(start, start + n, dtype=np.int64) % k
        if self.kind == "zipf":
            u = gen.random(n)
            return np.minimum(np.floor(np.exp(u * math.log(k + 1))).astype(np.int64) - 1, k - 1)
        if self.kind == "hot":
            idx = gen.integers(0, k, n, dtype=np.int64)
            idx[gen.random(n) < self.hot_fraction] = 0
            return idx
        raise ValueError("null keys have no indexes")


def key_bytes(index: int) -> bytes:
    """The key of index ``index`` (``k00000042``)."""
    return b"k%08d" % index


class KeyTable:
    """The K keys of a distribution as an Arrow array, so a batch's keys are one ``take``."""

    def __init__(self, dist: KeyDist) -> None:
        import pyarrow as pa

        self.dist = dist
        self.table = (
            pa.array([key_bytes(i) for i in range(dist.count)], type=pa.binary())
            if dist.kind != "none"
            else None
        )

    def keys(self, start: int, n: int, rng: object) -> object:
        """A pyarrow binary array of ``n`` keys (all null for ``none``)."""
        import pyarrow as pa

        if self.table is None:
            return pa.nulls(n, type=pa.binary())
        return self.table.take(pa.array(self.dist.indexes(start, n, rng)))
