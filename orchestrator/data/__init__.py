"""Datasets: prepared once into the canonical form (images.npy + labels.npy per split) with a content hash.

Sources: ``synthetic`` (seeded, any geometry), ``prepared`` (the cache ``bench data prepare NAME``
fills), or a path/URL of a named dataset's archive or folder (see ``registry``).
"""

from orchestrator.data.registry import DATASETS, DatasetInfo, dataset_names, get_dataset
from orchestrator.data.sources import prepare_split
from orchestrator.data.store import PreparedSplit, dataset_cache_root, list_splits

__all__ = ["DATASETS", "DatasetInfo", "PreparedSplit", "dataset_cache_root", "dataset_names", "get_dataset", "list_splits", "prepare_split"]
