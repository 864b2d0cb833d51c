"""Build hook beside pyproject.toml: mypyc compiles ``odradek.protocol.record_scan``, the framing
check the produce path runs on every record, into an extension module (about ten times as fast),
and ``odradek.protocol.wire_ids``, the schema id check of topics that validate them.

Only those modules, only where they can be: without mypyc, or if mypyc or the C compiler fails, the
package installs without it and the same module runs as Python.

It also puts ``odradek-pyspark.pth`` at the top of the wheel, so it lands in site-packages (see
``odradek.spark.worker_path``). An editable install leaves such files out; scripts/setup.sh copies
it there for the development environment.
"""

from __future__ import annotations

import os
from typing import Any

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "src/odradek-pyspark.pth"
COMPILED = ["src/odradek/protocol/record_scan.py", "src/odradek/protocol/wire_ids.py"]


def compiled_extensions() -> list[Any]:
    try:
        from mypyc.build import mypycify
    except ImportError:
        return []
    try:
        extensions = mypycify(COMPILED, opt_level="3")
    except Exception as e:  # mypyc's own failure: install without the extension
        print(f"odradek: record_scan and wire_ids stay Python ({e})")
        return []
    for extension in extensions:
        extension.optional = True  # a compiler failure skips it instead of failing the install
    return extensions


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        self.copy_file(PTH, self._pth())

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), self._pth()]

    def _pth(self) -> str:
        return os.path.join(self.build_lib, os.path.basename(PTH))


setup(ext_modules=compiled_extensions(), cmdclass={"build_py": BuildPy})
