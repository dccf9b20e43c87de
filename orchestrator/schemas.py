"""Load bench's JSON Schemas and validate documents against them."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator

from orchestrator.paths import schemas_dir

SCHEMA_NAMES = ("scenario", "run-spec", "engine-result", "run-record", "manifest", "summary", "maxbatch", "maxbatch-probes", "integrity", "label", "slurm-job")


class SchemaError(ValueError):
    """A document does not match its schema; ``where`` is the dotted path of the first error."""

    def __init__(self, schema: str, where: str, message: str):
        super().__init__(f"{where}: {message}" if where else message)
        self.schema = schema
        self.where = where
        self.detail = message


@cache
def load_schema(name: str) -> dict[str, Any]:
    return json.loads((schemas_dir() / f"{name}.schema.json").read_text())


# Documents people write (scenarios): an "integer" must be written as one (32, not 32.0), so a
# value keeps its type through the run id and the engines. Machine-written documents keep the
# JSON Schema meaning (any number with a zero fraction).
STRICT_INTEGERS = frozenset({"scenario"})
_STRICT = Draft202012Validator.TYPE_CHECKER.redefine(
    "integer", lambda _checker, value: isinstance(value, int) and not isinstance(value, bool))
_StrictValidator = jsonschema.validators.extend(Draft202012Validator, type_checker=_STRICT)


@cache
def _validator(name: str) -> Draft202012Validator:
    schema = load_schema(name)
    Draft202012Validator.check_schema(schema)
    return (_StrictValidator if name in STRICT_INTEGERS else Draft202012Validator)(schema)


def dotted(path: Any) -> str:
    return ".".join(str(p) for p in path)


def _describe(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return f"unknown field(s) {', '.join(extra)}"
    if error.validator == "required":
        return error.message.replace("is a required property", "is required")
    return describe_alternatives(error) or error.message


def describe_alternatives(error: jsonschema.ValidationError) -> str | None:
    """For an anyOf/oneOf error, why the value fails each allowed form (jsonschema's own message names none)."""
    if error.validator not in ("anyOf", "oneOf") or not error.context:
        return None
    first_per_form: dict[Any, jsonschema.ValidationError] = {}
    for sub in error.context:
        first_per_form.setdefault(sub.relative_schema_path[0] if sub.relative_schema_path else None, sub)
    reasons = "; ".join(sub.message for sub in first_per_form.values())
    return f"{error.instance!r} matches none of its allowed forms ({reasons})"


def validate(document: Any, name: str) -> None:
    """Raise SchemaError naming the field of the first (deepest-path) error."""
    errors = sorted(_validator(name).iter_errors(document), key=lambda e: (-len(e.absolute_path), str(e.absolute_path)))
    if errors:
        best = jsonschema.exceptions.best_match(errors) or errors[0]
        raise SchemaError(name, dotted(best.absolute_path), _describe(best))


def is_valid(document: Any, name: str) -> bool:
    return _validator(name).is_valid(document)
