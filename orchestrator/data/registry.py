"""The datasets bench knows by name: their geometry, classes, default sizes and how to prepare them.

Any name works with ``source: synthetic``; ``prepared`` and path/URL sources need a name listed here.
Adding a dataset = one module with a ``prepare(...)`` function plus one entry below.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from typing import Any

from orchestrator.data.store import PreparedRecord
from orchestrator.errors import BadInput


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    description: str
    geometry: tuple[int, int, int]  # the default (and for fixed-geometry datasets the only) H, W, C
    num_classes: int
    synthetic_samples: dict[str, int]  # `bench data prepare NAME --source synthetic` default sizes
    module: str  # orchestrator.data.<module>.prepare(source, sha256, geometry, samples) -> record
    fixed_geometry: bool = True
    partial: bool = False  # can prepare only the first N samples of each split (a scenario source then decodes no more)
    default_source: str | None = None  # where the data comes from when --source is not given
    source_help: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def prepare(self, source: str | None, sha256: str | None, geometry: tuple[int, int, int], samples: int | None) -> PreparedRecord:
        """Prepare the real data (or reuse the cache); returns the prepared record (see store)."""
        if self.fixed_geometry and tuple(geometry) != self.geometry:
            raise BadInput(f"{self.name} images are {'x'.join(map(str, self.geometry))}; "
                           f"the geometry asked for is {'x'.join(map(str, geometry))} (use source 'synthetic' for other geometries)")
        module = importlib.import_module(f"orchestrator.data.{self.module}")
        return module.prepare(self, source, sha256, tuple(geometry), samples)


DATASETS: dict[str, DatasetInfo] = {
    "cifar10": DatasetInfo(
        name="cifar10",
        description="CIFAR-10: 60,000 32x32 colour images in 10 classes (50,000 train, 10,000 test)",
        geometry=(32, 32, 3),
        num_classes=10,
        synthetic_samples={"train": 50_000, "test": 10_000},
        module="cifar10",
        default_source="https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
        source_help="the python version archive cifar-10-python.tar.gz (path or URL)",
    ),
    "imagenet": DatasetInfo(
        name="imagenet",
        description="ImageNet-style folder of class subfolders, decoded, resized and center-cropped (default 224x224)",
        geometry=(224, 224, 3),
        num_classes=1000,
        synthetic_samples={"train": 10_000, "test": 1_000},
        module="imagefolder",
        fixed_geometry=False,
        partial=True,
        source_help="a folder of class subfolders, or one with train/ and val/ (or test/) holding them",
    ),
}


def dataset_names() -> list[str]:
    return sorted(DATASETS)


SYNTHETIC_NAME = re.compile(r"(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # as the scenario schema's workload.dataset.name


def synthetic_only(name: str, what: str = "dataset") -> DatasetInfo:
    """A name bench does not know, for synthetic data only: 32x32x3, 10 classes unless told otherwise."""
    if not SYNTHETIC_NAME.fullmatch(name):
        raise BadInput(f"{what}: '{name[:80]}' is not a dataset name (letters, digits, '_', '-', '.'; at most 64)")
    return DatasetInfo(name=name, description=f"synthetic data named {name}", geometry=(32, 32, 3), num_classes=10,
                       synthetic_samples={"train": 10_000, "test": 1_000}, module="", fixed_geometry=False)


def get_dataset(name: str, what: str = "dataset", synthetic: bool = False) -> DatasetInfo:
    """The dataset named ``name``; with ``synthetic`` any well-formed name (see :func:`synthetic_only`)."""
    info = DATASETS.get(name)
    if info is None and synthetic:
        return synthetic_only(name, what)
    if info is None:
        raise BadInput(f"{what}: unknown dataset '{name}' (known: {', '.join(dataset_names())}; source 'synthetic' works with any name)")
    return info
