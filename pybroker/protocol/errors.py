"""``ErrorCode`` under its former name, for the scripts under ``bench/`` whose committed results
name them (``bench/check_results.py`` calls a result stale once its script changes). It lives in
``pybroker.common.errors``; this module goes when ``bench/`` becomes a package (issue 35, step 5).
"""

from pybroker.common.errors import ErrorCode

__all__ = ["ErrorCode"]
