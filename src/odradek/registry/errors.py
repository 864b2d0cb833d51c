"""The registry's errors, as Confluent Schema Registry answers them: an HTTP status and a body
``{"error_code": N, "message": "..."}`` whose code starts with the status (40401 is a 404)."""

from __future__ import annotations


class RegistryError(Exception):
    """An answer other than success; ``status`` is the HTTP status, ``code`` Confluent's."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def status(self) -> int:
        text = str(self.code)
        return int(text[:3]) if len(text) > 3 else self.code

    def body(self) -> dict[str, object]:
        return {"error_code": self.code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(40401, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: object) -> RegistryError:
    return RegistryError(40402, f"Version {version} not found for subject '{subject}'.")


def schema_not_found(detail: str = "Schema not found") -> RegistryError:
    return RegistryError(40403, detail)


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        40404, f"Subject '{subject}' was soft deleted. Set permanent=true to delete permanently"
    )


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        40405, f"Subject '{subject}' was not deleted first before being permanently deleted"
    )


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        40406,
        f"Subject '{subject}' Version {version} was soft deleted. Set permanent=true to delete "
        "permanently",
    )


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        40407,
        f"Subject '{subject}' Version {version} was not deleted first before being permanently "
        "deleted",
    )


def compatibility_not_configured(subject: str) -> RegistryError:
    return RegistryError(
        40408, f"Subject '{subject}' does not have subject-level compatibility configured"
    )


def mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(40409, f"Subject '{subject}' does not have subject-level mode configured")


def incompatible(messages: list[str]) -> RegistryError:
    detail = "; ".join(messages) if messages else "the schema is incompatible"
    return RegistryError(
        409,
        "Schema being registered is incompatible with an earlier schema for subject: " + detail,
    )


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(42201, f"Invalid schema: {detail}")


def invalid_version(version: object) -> RegistryError:
    return RegistryError(
        42202,
        f"The specified version '{version}' is not a valid version id. Allowed values are "
        'between [1, 2^31-1] and the string "latest"',
    )


def invalid_compatibility_level(level: object) -> RegistryError:
    return RegistryError(
        42203,
        f"Invalid compatibility level. Valid values are none, backward, forward, full, "
        f"backward_transitive, forward_transitive, and full_transitive (got {level!r})",
    )


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(
        42204, f"Invalid mode. Valid values are READWRITE, READONLY, IMPORT (got {mode!r})"
    )


def operation_not_permitted(detail: str) -> RegistryError:
    return RegistryError(42205, detail)


def reference_exists(detail: str) -> RegistryError:
    return RegistryError(42206, detail)


def store_error(detail: str) -> RegistryError:
    return RegistryError(50001, f"Error in the backend data store: {detail}")


def store_timeout(detail: str) -> RegistryError:
    return RegistryError(50002, f"Operation timed out: {detail}")


def bad_request(detail: str) -> RegistryError:
    """A body that is not the JSON asked for, or a malformed query."""
    return RegistryError(400, detail)
