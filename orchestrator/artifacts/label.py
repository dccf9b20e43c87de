"""An artifact's label: a short free text (``bench scenario run --label``) kept in ``label.json`` at its top level.

The label names what changed between artifacts of one scenario ("torch 2.11 image", "driver 575"), for
``bench results list`` and ``bench results history``. ``label.json`` (schemas/label.schema.json) is listed and
hashed in the manifest like every file; ``bench scenario resume`` keeps it, ``resume --label`` replaces it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from orchestrator.artifacts.layout import LABEL, MANIFEST, Artifact, open_artifact
from orchestrator.clock import utc_now
from orchestrator.errors import BadInput
from orchestrator.schemas import SchemaError, validate

MAX_LABEL = 80  # characters
WORD = r"[\w.,:;+=@#()/-]+"
LABEL_TEXT = re.compile(rf"{WORD}( +{WORD})*")  # the schema's pattern
ALLOWED = "letters, digits, spaces and _ . , : ; + = @ # ( ) / -"


def check_label(value: str | None, option: str = "--label") -> str | None:
    """The label as stored (surrounding spaces dropped), None for none; BadInput naming ``option`` when refused."""
    if value is None:
        return None
    label = value.strip(" ")
    if not label:
        raise BadInput(f"{option}: empty; give a short text such as 'torch 2.11 image'")
    if len(label) > MAX_LABEL:
        raise BadInput(f"{option}: {len(label)} characters, more than {MAX_LABEL}")
    if not LABEL_TEXT.fullmatch(label):
        bad = next((ch for ch in label if not re.fullmatch(r"[\w.,:;+=@#()/ -]", ch)), None)
        shown = (f"'{bad}'" if bad.isprintable() else f"U+{ord(bad):04X}") if bad is not None else None
        what = f"the character {shown}" if shown else "spaces it may not"
        raise BadInput(f"{option}: '{label}' holds {what}; a label holds {ALLOWED}")
    return label


def label_document(label: str) -> dict:
    return {"schema_version": 1, "label": label, "set_at": utc_now()}


def write_label(root: Path, label: str) -> None:
    """Write ``label.json`` into the artifact folder ``root`` (the manifest lists it when next written)."""
    from orchestrator.jsonio import write_json

    write_json(root / LABEL, label_document(label), "label")


def read_label(root: Path) -> str | None:
    """The artifact's label (None without ``label.json``); ValueError when the file is unreadable or invalid."""
    from orchestrator.artifacts.walk import read_bytes_no_follow

    try:
        document = json.loads(read_bytes_no_follow(root, LABEL, 1 << 20))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"{LABEL}: refused ({exc.strerror or exc}; links are never followed)") from None
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{LABEL}: unreadable ({exc})") from None
    try:
        validate(document, "label")
    except SchemaError as exc:
        raise ValueError(f"{LABEL}: invalid ({exc})") from None
    return document["label"]


def relabel(root: Path, label: str) -> None:
    """Replace the label of the existing artifact ``root`` and rewrite its manifest (its ``complete`` flag and the
    folders it declares in flight kept), so that the artifact validates as before."""
    from orchestrator.artifacts.manifest import write_manifest
    from orchestrator.artifacts.walk import read_bytes_no_follow

    artifact: Artifact = open_artifact(root)
    try:
        manifest = json.loads(read_bytes_no_follow(root, MANIFEST, 256 << 20))
    except (OSError, ValueError) as exc:
        raise BadInput(f"{root / MANIFEST}: unreadable ({exc})") from None
    write_label(root, label)
    write_manifest(artifact, complete=bool(manifest.get("complete", True)), in_flight_folders=list(manifest.get("in_flight") or []) or None)
