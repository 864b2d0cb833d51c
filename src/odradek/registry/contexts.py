"""Confluent's schema contexts, by the subject: a subject qualified as ``:.name:subject`` lives
in the context ``.name``; one unqualified (or qualified ``:.:``, the default context said) in
the default context ``.``. Each context numbers its ids on its own.

Pure functions on names: any thread (the Spark data source's workers too: standard library
only).
"""

from __future__ import annotations

DEFAULT_CONTEXT = "."


def context_of(subject: str) -> tuple[str, str]:
    """A subject's context and its name within it: ``:.ctx:name`` is (``.ctx``, ``name``),
    anything else is in the default context ``.``."""
    if subject.startswith(":."):
        end = subject.find(":", 1)
        if end > 0:
            return subject[1:end], subject[end + 1 :]
    return DEFAULT_CONTEXT, subject


def unqualified_default(subject: str) -> str:
    """``:.:name`` (the default context, said) as ``name``: one spelling of each subject."""
    return subject[3:] if subject.startswith(":.:") else subject


def qualified(subject: str, context: str) -> str:
    """A reference's subject as a schema in ``context`` means it: an unqualified one is in
    that context (Confluent's rule)."""
    if context == DEFAULT_CONTEXT or subject.startswith(":."):
        return subject
    return f":{context}:{subject}"
