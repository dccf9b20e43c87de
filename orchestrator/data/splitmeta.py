"""A canonical split's ``dataset.json``, typed: what its producer said of it, and what sealing it found.

The file keeps the key order bench has always written: the producer's keys first (``name``,
``split``, ``synthetic``, ``seed``, ``num_classes``, ``class_names``, ``class_counts`` when the producer
counted them, ``source``, ``subset_of``), then the sealed ``sha256``, ``samples``, ``shape`` and, when
the producer gave no counts but a class count, the ``class_counts`` sealing made.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

SUBSET_RULE = "first N samples"


@dataclass(frozen=True)
class ArchiveMembers:
    """A split read from members of an archive (CIFAR-10's batches): the archive's sha256 and the member names."""

    archive_sha256: str
    members: tuple[str, ...]

    def to_json(self) -> dict[str, str | list[str]]:
        return {"archive_sha256": self.archive_sha256, "members": list(self.members)}


@dataclass(frozen=True)
class FolderFiles:
    """A split decoded from an image folder: the folder and the fingerprint of its files."""

    folder: str
    fingerprint: str

    def to_json(self) -> dict[str, str]:
        return {"folder": self.folder, "fingerprint": self.fingerprint}


def source_from_json(doc: Any) -> ArchiveMembers | FolderFiles:
    if "archive_sha256" in doc:
        return ArchiveMembers(str(doc["archive_sha256"]), tuple(str(m) for m in doc["members"]))
    if "folder" in doc:
        return FolderFiles(str(doc["folder"]), str(doc["fingerprint"]))
    raise ValueError(f"a split source names an archive or a folder, not {sorted(doc)}")


@dataclass(frozen=True)
class SubsetOf:
    """The split a ``first N samples`` split was cut from."""

    sha256: str
    samples: int
    rule: str = SUBSET_RULE

    def to_json(self) -> dict[str, str | int]:
        return {"sha256": self.sha256, "samples": self.samples, "rule": self.rule}


@dataclass(frozen=True)
class SplitDescription:
    """What a producer says of a split before it is written. ``class_counts``: counted by the producer
    (None: sealing counts them when ``num_classes`` is known)."""

    name: str
    split: str
    synthetic: bool
    num_classes: int | None = None
    seed: int | None = None
    class_names: tuple[str, ...] | None = None
    class_counts: tuple[int, ...] | None = None
    source: ArchiveMembers | FolderFiles | None = None
    subset_of: SubsetOf | None = None

    def __post_init__(self) -> None:
        if self.class_counts is not None and len(self.class_counts) != self.num_classes:
            raise ValueError(f"{len(self.class_counts)} class counts for {self.num_classes} classes")
        if self.class_names is not None and len(self.class_names) != self.num_classes:
            raise ValueError(f"{len(self.class_names)} class names for {self.num_classes} classes")

    def cut(self, full: SplitMeta) -> SplitDescription:
        """The description of the first samples of ``full`` (whose description this is): no counts, a subset."""
        return replace(self, class_counts=None, subset_of=SubsetOf(full.sha256, full.samples))


@dataclass(frozen=True)
class SplitMeta:
    """A sealed split's ``dataset.json``. ``sealed_counts``: the class counts sealing made (the
    producer gave none)."""

    about: SplitDescription
    sha256: str
    samples: int
    shape: tuple[int, ...]
    sealed_counts: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.sealed_counts is not None and self.about.class_counts is not None:
            raise ValueError("class counts are the producer's or the seal's, not both")

    @property
    def class_counts(self) -> tuple[int, ...] | None:
        return self.about.class_counts if self.about.class_counts is not None else self.sealed_counts

    @classmethod
    def from_json(cls, doc: Any) -> SplitMeta:
        """The metadata of a ``dataset.json`` document; ValueError when it is not one."""
        try:
            keys = list(doc)
            counts = tuple(int(c) for c in doc["class_counts"]) if doc.get("class_counts") is not None else None
            early = counts is not None and keys.index("class_counts") < keys.index("sha256")
            names = doc.get("class_names")
            about = SplitDescription(
                str(doc["name"]), str(doc["split"]), bool(doc.get("synthetic", False)),
                int(doc["num_classes"]) if doc.get("num_classes") is not None else None,
                int(doc["seed"]) if doc.get("seed") is not None else None,
                tuple(str(n) for n in names) if names is not None else None, counts if early else None,
                source_from_json(doc["source"]) if doc.get("source") is not None else None,
                SubsetOf(str(doc["subset_of"]["sha256"]), int(doc["subset_of"]["samples"]), str(doc["subset_of"]["rule"]))
                if doc.get("subset_of") is not None else None)
            return cls(about, str(doc["sha256"]), int(doc["samples"]), tuple(int(v) for v in doc["shape"]), None if early else counts)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a split's metadata ({exc.__class__.__name__}: {exc})") from None

    def to_json(self) -> dict[str, Any]:
        """The file's document, keys in the order bench has always written them."""
        about = self.about
        optional = [("seed", about.seed), ("num_classes", about.num_classes),
                    ("class_names", list(about.class_names) if about.class_names is not None else None),
                    ("class_counts", list(about.class_counts) if about.class_counts is not None else None),
                    ("source", about.source.to_json() if about.source is not None else None),
                    ("subset_of", about.subset_of.to_json() if about.subset_of is not None else None)]
        return {"name": about.name, "split": about.split, "synthetic": about.synthetic,
                **{key: value for key, value in optional if value is not None},
                "sha256": self.sha256, "samples": self.samples, "shape": list(self.shape),
                **({"class_counts": list(self.sealed_counts)} if self.sealed_counts is not None else {})}
