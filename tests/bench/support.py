"""What the bench tests share: ``odradek bench``'s flags parsed as the command line does."""

from __future__ import annotations

import argparse

from odradek.bench import options as bench_options


def parse(*argv: str) -> bench_options.BenchOptions:
    parser = argparse.ArgumentParser()
    bench_options.add_arguments(parser)
    return bench_options.options_from_args(parser.parse_args(list(argv)))
