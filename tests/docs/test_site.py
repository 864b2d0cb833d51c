"""The documentation site builds without a warning, and the README keeps the two commands."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT_S = 300


def test_mkdocs_builds_the_site_strictly(tmp_path: Path) -> None:
    build = [sys.executable, "-m", "mkdocs", "build", "--strict"]
    done = subprocess.run(
        [*build, "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "architecture" / "index.html").is_file()


def test_the_readme_gives_the_two_commands() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert any(line.startswith("bash scripts/serve.sh ") for line in lines)
    assert any(line.startswith("bash scripts/test.sh ") for line in lines)
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_every_link_of_the_readme_leads_to_a_file() -> None:
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", (ROOT / "README.md").read_text())
    local = [t for t in targets if "://" not in t]
    assert local
    missing = [t for t in local if not (ROOT / t).is_file()]
    assert not missing
