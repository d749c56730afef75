"""Data for contrasweep: sources, splits, LaCon protocols, tokenise once, Arrow cache.

```python
from contrasweep.data import DataConfig, prepare, load_splits, collate_numpy
prep = prepare(DataConfig.from_dict({"source": "bbc_news", "protocol": "few_shot", "k": 20}))
splits = load_splits(prep.path)                  # {"train", "validation", "test"} -> pyarrow.Table
batch = collate_numpy(splits["train"], [0, 1, 2])  # numpy int64, padded to the longest row
```

May import: ``contrasweep.errors``, ``trainables.collate``, ``trainables.encoder``,
``trainables.encoder_names`` (the tokeniser), ``trainables.evaluation`` (multi-label statistics),
``trainables.metrics`` (chance levels),
datasets, pyarrow, numpy. Never another room of ``contrasweep``.
"""

from contrasweep.data.cache import FORMAT_VERSION, cache_root
from contrasweep.data.config import BUNDLED, PROTOCOLS, DataConfig
from contrasweep.data.prepare import PreparedData, load_splits, prepare
from trainables.collate import collate_numpy

__all__ = [
    "BUNDLED",
    "FORMAT_VERSION",
    "PROTOCOLS",
    "DataConfig",
    "PreparedData",
    "cache_root",
    "collate_numpy",
    "load_splits",
    "prepare",
]
