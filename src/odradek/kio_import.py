"""kio without its Hypothesis strategies.

When kio is imported where Hypothesis is importable, ``kio.static._phantom`` registers a
Hypothesis strategy for each of its types: about half a second of CPU per process. Processes
that never use them (the ``odradek`` command, whose brokers a test suite starts by the hundred;
the Python workers Spark starts, one per streaming query) import kio's phantom types first with
Hypothesis hidden. ``_phantom`` decides once, at its import, so Hypothesis is given back at once:
code the process runs later can still import it. Importing odradek as a library changes nothing.

Importable without kio, and cheap: Spark's workers call it before ``site`` has finished.
"""

from __future__ import annotations

import sys


def import_kio_without_strategies() -> None:
    """Import kio's phantom types, where Hypothesis would be found, as if it were not there.

    Nothing if kio is not installed or already imported, or Hypothesis already imported (some
    code of the process wants it). Afterwards ``import hypothesis`` works as before."""
    if "kio.static._phantom" in sys.modules or "hypothesis" in sys.modules:
        return
    # None in sys.modules makes ``import hypothesis`` raise ImportError, kio's "not installed".
    sys.modules["hypothesis"] = None  # type: ignore[assignment]
    try:
        import kio.static._phantom  # noqa: F401
    except ImportError:
        pass
    finally:
        del sys.modules["hypothesis"]
