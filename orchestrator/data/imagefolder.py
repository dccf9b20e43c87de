"""ImageNet-style image folders: class subfolders of images, decoded once into the canonical form.

Layouts: ``FOLDER/<class>/...`` (one split, ``train``), or ``FOLDER/train/<class>/...`` with
``FOLDER/val/<class>/...`` (or ``validation/``, ``test/``) as the ``test`` split. Class index =
position of the class subfolder in the sorted list of the train split's subfolders. Images (any
depth below their class folder; .jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp) are decoded with
Pillow (not a bench dependency: ``pip install pillow``), converted to RGB (or L for 1 channel),
resized so that they cover (H/0.875) x (W/0.875) pixels (shorter side 256 for 224), bilinear, and
center-cropped to H x W: the usual ImageNet evaluation transform. Sample order: the files sorted by
class then path, then one fixed permutation (seed 0), so that "the first N samples" is a random
subset of every class rather than the first classes.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from orchestrator.data.fetch import is_url
from orchestrator.data.splitmeta import FolderFiles, SplitDescription
from orchestrator.data.store import PreparedRecord, SplitEntry, SplitWriter, class_counts, dataset_cache_root, geometry_tag, read_prepared, write_prepared
from orchestrator.errors import BadInput

IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"})
TEST_DIRS = ("val", "validation", "test")
RESIZE_RATIO = 0.875
ORDER_SEED = 0
_BATCH = 256


def _require_pillow():
    try:
        from PIL import Image
    except ImportError:
        raise BadInput("reading an image folder needs Pillow, which is not installed (pip install pillow)") from None
    return Image


def _subfolders(folder: Path) -> list[str]:
    return sorted(entry.name for entry in os.scandir(folder) if entry.is_dir() and not entry.name.startswith("."))


def _shown(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _inside(path: Path, root: Path) -> Path:
    """The real path of ``path`` (below ``root``); BadInput when a link leads it out of ``root``."""
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(root):
        raise BadInput(f"dataset source {root}: {_shown(path, root)} is a link to {real}, outside the folder; "
                       "links out of a dataset folder are not followed (copy or move the files into it)")
    return real


def _images_below(folder: Path, root: Path, seen: set[tuple[int, int]]) -> list[Path]:
    """The images under ``folder`` (any depth, sorted, os.walk's top-down order), following links only
    inside ``root``; a folder reached twice (a link loop, or two links to one folder) is BadInput."""
    found: list[Path] = []
    stack = [folder]
    while stack:
        current = stack.pop()
        info = _inside(current, root).stat()
        if (info.st_dev, info.st_ino) in seen:
            raise BadInput(f"dataset source {root}: {_shown(current, root)} leads back to a folder already read "
                           "(a link loop, or two links to one folder)")
        seen.add((info.st_dev, info.st_ino))
        subdirs = []
        for entry in sorted(os.scandir(current), key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            if entry.is_dir():
                subdirs.append(Path(entry.path))
            elif Path(entry.name).suffix.lower() in IMAGE_EXTENSIONS:
                if entry.is_symlink():
                    _inside(Path(entry.path), root)
                found.append(Path(entry.path))
        stack.extend(reversed(subdirs))
    return found


def discover(root: Path) -> tuple[list[str], dict[str, Path]]:
    """(class names, {split: folder}) of an image folder."""
    if not root.is_dir():
        raise BadInput(f"dataset source {root}: not a folder (expected class subfolders of images)")
    split_dirs: dict[str, Path] = {}
    if (root / "train").is_dir() and _subfolders(root / "train"):
        split_dirs["train"] = root / "train"
        for name in TEST_DIRS:
            if (root / name).is_dir() and _subfolders(root / name):
                split_dirs["test"] = root / name
                break
    else:
        split_dirs["train"] = root
    classes = _subfolders(split_dirs["train"])
    if not classes:
        raise BadInput(f"dataset source {root}: no class subfolders")
    return classes, split_dirs


def list_files(classes: list[str], folder: Path, root: Path | None = None) -> list[tuple[Path, int]]:
    """(image path, class index) of one split, in the canonical (seeded permutation) order; links are
    followed only inside ``root`` (the dataset folder, resolved; default ``folder``)."""
    root = Path(os.path.realpath(root or folder))
    index = {name: i for i, name in enumerate(classes)}
    files: list[tuple[Path, int]] = []
    seen: set[tuple[int, int]] = set()
    for name in _subfolders(folder):
        if name not in index:
            raise BadInput(f"dataset source {folder}: class folder '{name}' is not a class of the train split")
        files.extend((path, index[name]) for path in _images_below(folder / name, root, seen))
    if not files:
        raise BadInput(f"dataset source {folder}: no images ({', '.join(sorted(IMAGE_EXTENSIONS))}) in its class folders")
    order = np.random.Generator(np.random.PCG64(ORDER_SEED)).permutation(len(files))
    return [files[i] for i in order]


def _fingerprint(root: Path, geometry: tuple[int, int, int], samples: int | None, splits: dict[str, list[tuple[Path, int]]]) -> str:
    digest = hashlib.sha256(f"imagefolder-v1 {geometry_tag(geometry)} {samples}\n".encode())
    for split, files in sorted(splits.items()):
        for path, label in files:
            stat = path.stat()
            digest.update(f"{split}\t{path.relative_to(root)}\t{label}\t{stat.st_size}\t{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def decode(path: Path, geometry: tuple[int, int, int], image_module=None) -> np.ndarray:
    """One image -> uint8 H x W x C (resize to cover H/0.875 x W/0.875, center crop)."""
    image_module = image_module or _require_pillow()
    height, width, channels = geometry
    mode = "RGB" if channels == 3 else "L"
    try:
        with image_module.open(path) as opened:
            scale = max(height / RESIZE_RATIO / opened.height, width / RESIZE_RATIO / opened.width)
            opened.draft(mode, (max(1, round(opened.width * scale)), max(1, round(opened.height * scale))))  # JPEG: decode smaller, never below the target
            image = opened.convert(mode)
        scale = max(height / RESIZE_RATIO / image.height, width / RESIZE_RATIO / image.width)
        new_w, new_h = max(width, round(image.width * scale)), max(height, round(image.height * scale))
        image = image.resize((new_w, new_h), image_module.Resampling.BILINEAR)
        left, top = (new_w - width) // 2, (new_h - height) // 2
        array = np.asarray(image.crop((left, top, left + width, top + height)), dtype=np.uint8)
    except Exception as exc:  # Pillow raises many kinds for a broken file
        raise BadInput(f"cannot decode image {path}: {exc.__class__.__name__}: {exc}") from None
    return array.reshape(height, width, channels)


def _progress():
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True)
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                    console=console, transient=True, disable=not console.is_terminal)


def prepare(info, source: str | None, sha256: str | None, geometry: tuple[int, int, int], samples: int | None) -> PreparedRecord:
    """Decode the folder once into canonical train (and test) splits; reuse them while the folder is unchanged."""
    if not source:
        raise BadInput(f"{info.name}: --source FOLDER is required ({info.source_help}), or --source synthetic")
    if is_url(source):
        raise BadInput(f"{info.name}: a URL source is not supported; give a local folder ({info.source_help})")
    if sha256:
        raise BadInput(f"--sha256: {info.name} is read from a folder; its splits are identified by their content hash")
    if geometry[2] not in (1, 3):
        raise BadInput(f"{info.name}: {geometry[2]} channels; an image folder is decoded to 1 (L) or 3 (RGB) channels")
    root = Path(source).expanduser().resolve()
    classes, split_dirs = discover(root)
    files = {split: list_files(classes, folder, root)[:samples] for split, folder in split_dirs.items()}
    fingerprint = _fingerprint(root, geometry, samples, files)
    record = read_prepared(info.name, geometry)
    if record is not None and record.source.get("fingerprint") == fingerprint:
        return replace(record, cached=True)

    image_module = _require_pillow()
    parent = dataset_cache_root() / info.name
    splits: dict[str, SplitEntry] = {}
    workers = min(32, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for split, entries in files.items():
            stem = f"{split}-folder-{geometry_tag(geometry)}-n{len(entries)}-f{fingerprint[:12]}"
            with _progress() as progress, SplitWriter(parent, stem, len(entries), geometry) as writer:
                task = progress.add_task(f"decode {info.name}/{split}", total=len(entries))
                for start in range(0, len(entries), _BATCH):
                    chunk = entries[start:start + _BATCH]
                    writer.write(np.stack(list(pool.map(lambda item: decode(item[0], geometry, image_module), chunk))))
                    writer.labels[start:start + len(chunk)] = [label for _, label in chunk]
                    progress.advance(task, len(chunk))
                counts = class_counts(writer.labels, len(classes))
                folder, split_sha = writer.seal(SplitDescription(
                    info.name, split, False, len(classes), class_names=tuple(classes), class_counts=tuple(counts),
                    source=FolderFiles(str(split_dirs[split]), fingerprint)))
            splits[split] = SplitEntry(folder.name, split_sha, len(entries), tuple(counts))
    record = PreparedRecord(
        name=info.name,
        geometry=tuple(geometry),
        num_classes=len(classes),
        class_names=tuple(classes),
        synthetic=False,
        source={
            "kind": "folder",
            "location": str(root),
            "fingerprint": fingerprint,
            "splits": {split: str(folder) for split, folder in split_dirs.items()},
            "samples_limit": samples,
            "transform": f"RGB/L, bilinear resize to cover {RESIZE_RATIO} crop ratio, center crop; order: class-sorted, permuted with seed {ORDER_SEED}",
            "pillow": getattr(image_module, "__version__", None) or _pillow_version(),
        },
        prepared_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        splits=splits,
    )
    write_prepared(record)
    return record


def _pillow_version() -> str | None:
    try:
        import PIL

        return PIL.__version__
    except (ImportError, AttributeError):
        return None
