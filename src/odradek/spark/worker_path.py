"""Spark's Python workers import PySpark from the installed package instead of its zip.

Spark starts every Python worker with ``$SPARK_HOME/python/lib/pyspark.zip`` first on
``PYTHONPATH``. Where PySpark was installed by pip, ``SPARK_HOME`` is that installed package, so
the zip holds the same files as the package directory it sits in; but Python keeps no bytecode
cache for modules imported from a zip, so each fresh worker compiles PySpark from source
(about 1.15 CPU-seconds here, against 0.40 from the package's cached bytecode). Most workers are
forked from one daemon, but a streaming query of a Python data source starts a fresh source
runner for every query, so that compile was most of a streaming read's fixed cost.

The same worker then imports kio (through odradek's client), which registers Hypothesis
strategies for its types when Hypothesis is importable: 0.3 to 0.5 CPU-seconds per process
where Hypothesis is installed (a test environment), paid again by every streaming query's
source runner. :func:`prefer_installed_pyspark` therefore imports kio without them
(:mod:`odradek.kio_import`, as the ``odradek`` command does).

``odradek-pyspark.pth``, installed beside the package in site-packages, calls
:func:`prefer_installed_pyspark` when an interpreter starts with a ``pyspark.zip`` on its path.
Only a zip inside a ``pyspark`` package whose parent directory is itself on the path is dropped,
so the code imported is the same; the zip of a separate Spark installation stays. Importable
without PySpark, and cheap: it runs before ``site`` has finished.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from odradek.kio_import import import_kio_without_strategies

_ZIP = "pyspark.zip"


def without_installed_zip(path: Sequence[str]) -> list[str]:
    """``path`` less each ``pyspark.zip`` that belongs to a PySpark package found on ``path``."""
    directories = {
        os.path.realpath(entry) for entry in path if entry and not entry.endswith(".zip")
    }

    def from_installed_package(entry: str) -> bool:
        if os.path.basename(entry) != _ZIP:
            return False
        package = os.path.dirname(os.path.dirname(os.path.dirname(entry)))  # .../pyspark
        return (
            os.path.basename(package) == "pyspark"
            and os.path.isfile(os.path.join(package, "__init__.py"))
            and os.path.realpath(os.path.dirname(package)) in directories
        )

    return [entry for entry in path if not from_installed_package(entry)]


def prefer_installed_pyspark() -> None:
    """What a Python worker Spark started does first (``odradek-pyspark.pth``)."""
    sys.path[:] = without_installed_zip(sys.path)
    import_kio_without_strategies()
