"""Scraping a broker's ``/metrics`` in tests: samples by name and labels, parsed with
prometheus_client's own parser."""

from __future__ import annotations

import re
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Labels = tuple[tuple[str, str], ...]


class Scrape:
    """One scrape's samples."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: dict[tuple[str, Labels], float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                self.samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value

    def value(self, name: str, **labels: str) -> float:
        """The sample of ``name`` with exactly these labels (0 when there is none)."""
        return self.samples.get((name, tuple(sorted(labels.items()))), 0.0)

    def total(self, name: str, **labels: str) -> float:
        """The sum over every sample of ``name`` whose labels include these."""
        wanted = set(labels.items())
        return sum(
            value
            for (sample, sample_labels), value in self.samples.items()
            if sample == name and wanted <= set(sample_labels)
        )


def scrape(address: str, timeout: float = 10) -> Scrape:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=timeout) as response:
        assert response.status == 200
        return Scrape(response.read().decode())


def metrics_address(broker_output: str) -> str:
    """Where a broker process serves ``/metrics``, from the line it logs when it starts."""
    found = re.search(r"metrics on http://([^/\s]+)/metrics", broker_output)
    assert found, f"no metrics line in:\n{broker_output}"
    return found.group(1)
