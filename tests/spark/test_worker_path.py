"""Spark's Python workers import the installed PySpark, with its bytecode cache, not its zip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.spark.worker_path import without_installed_zip


def _package(site: Path) -> Path:
    package = site / "pyspark"
    (package / "python" / "lib").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "python" / "lib" / "pyspark.zip").write_bytes(b"")
    return package


def test_the_zip_inside_a_package_on_the_path_is_dropped(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    zipped = str(_package(site) / "python" / "lib" / "pyspark.zip")
    py4j = str(site / "pyspark" / "python" / "lib" / "py4j-0.10.9.9-src.zip")
    assert without_installed_zip(["", zipped, py4j, "/usr/lib/python3.11", str(site)]) == [
        "",
        py4j,
        "/usr/lib/python3.11",
        str(site),
    ]
    # the same directory named another way (a symbolic link, "..") is the same directory
    (tmp_path / "linked").symlink_to(site)
    assert without_installed_zip([zipped, str(tmp_path / "linked")]) == [str(tmp_path / "linked")]
    assert without_installed_zip([zipped, f"{tmp_path}/x/../site-packages"]) == [
        f"{tmp_path}/x/../site-packages"
    ]


def test_a_zip_whose_package_is_not_on_the_path_stays(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    zipped = str(_package(site) / "python" / "lib" / "pyspark.zip")
    assert without_installed_zip([zipped, "/usr/lib/python3.11"]) == [zipped, "/usr/lib/python3.11"]
    # a Spark distribution's SPARK_HOME (not a pyspark package) keeps its zip
    home = tmp_path / "spark-4.1.0-bin-hadoop3"
    (home / "python" / "lib").mkdir(parents=True)
    (home / "python" / "lib" / "pyspark.zip").write_bytes(b"")
    distribution = str(home / "python" / "lib" / "pyspark.zip")
    assert without_installed_zip([distribution, str(tmp_path)]) == [distribution, str(tmp_path)]


def test_a_worker_started_as_spark_starts_it_imports_the_installed_pyspark(tmp_path: Path) -> None:
    """Spark puts the installed package's own zip first on PYTHONPATH; the interpreter must still
    import the package directory (the ``.pth`` installed beside it: scripts/setup.sh, the wheel)."""
    pyspark = pytest.importorskip("pyspark")
    home = Path(pyspark.__file__).parent
    zipped = home / "python" / "lib" / "pyspark.zip"
    if not zipped.is_file():
        pytest.skip("this PySpark has no python/lib/pyspark.zip")
    assert imported_pyspark(zipped) == str(home / "__init__.py")
    # and a zip copied elsewhere (another Spark's) is still imported from
    elsewhere = tmp_path / "spark" / "python" / "lib"
    elsewhere.mkdir(parents=True)
    (elsewhere / "pyspark.zip").symlink_to(zipped)
    assert imported_pyspark(elsewhere / "pyspark.zip") == str(
        elsewhere / "pyspark.zip" / "pyspark" / "__init__.py"
    )


def imported_pyspark(first_on_path: Path) -> str:
    """Where a fresh interpreter with ``first_on_path`` first on PYTHONPATH imports pyspark."""
    return _run_with_first_on_path(first_on_path, "import pyspark; print(pyspark.__file__)")


def _run_with_first_on_path(first_on_path: Path | None, code: str) -> str:
    """The last line ``code`` prints in a fresh interpreter (``first_on_path`` first on
    PYTHONPATH, as Spark starts its workers)."""
    pythonpath = os.environ.get("PYTHONPATH", "")
    if first_on_path is not None:
        pythonpath = f"{first_on_path}{os.pathsep}{pythonpath}"
    return (
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONPATH": pythonpath},
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        .stdout.strip()
        .splitlines()[-1]
    )


_KIO_PROBE = """
import kio.static._phantom as phantom
import hypothesis.strategies
print("kio sees hypothesis:", phantom.hypothesis is not None, "imports it:", hypothesis.__name__)
"""


def test_a_worker_started_as_spark_starts_it_keeps_kio_from_hypothesis() -> None:
    """kio registers no Hypothesis strategies in a Spark worker, and the worker's own code can
    still import Hypothesis."""
    pyspark = pytest.importorskip("pyspark")
    pytest.importorskip("hypothesis")
    zipped = Path(pyspark.__file__).parent / "python" / "lib" / "pyspark.zip"
    if not zipped.is_file():
        pytest.skip("this PySpark has no python/lib/pyspark.zip")
    assert (
        _run_with_first_on_path(zipped, _KIO_PROBE)
        == "kio sees hypothesis: False imports it: hypothesis"
    )
    # any other process (this suite's, a driver's) keeps kio's strategies
    assert (
        _run_with_first_on_path(None, _KIO_PROBE)
        == "kio sees hypothesis: True imports it: hypothesis"
    )


def test_hiding_hypothesis_leaves_a_process_that_imported_it_alone() -> None:
    pytest.importorskip("hypothesis")
    code = (
        "import hypothesis\n"
        "from odradek.kio_import import import_kio_without_strategies\n"
        "import_kio_without_strategies()\n"
        "import kio.static._phantom as phantom\n"
        "print(phantom.hypothesis is not None)"
    )
    assert _run_with_first_on_path(None, code) == "True"
