"""Datasets: prepared once into the canonical form (images.npy + labels.npy per split) with a content hash."""

from orchestrator.data.store import PreparedSplit, dataset_cache_root, prepare_split

__all__ = ["PreparedSplit", "dataset_cache_root", "prepare_split"]
