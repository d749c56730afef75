"""Multi-label data: reading label sets, a long-tailed offline corpus, label filtering,
label statistics, multi-hot encoding and a split that keeps every label in train.

=================  ==========================================================================
module             what it holds
=================  ==========================================================================
``labels``         the ``labels`` column type, label-name order, multi-hot encoding
``read``           local files and in-memory tables: list-valued or 0/1 label columns
``hub``            Hugging Face hub datasets (``source: hub:NAME[:CONFIG]``)
``bbc``            ``bbc_multilabel``, the long-tailed corpus derived from BBC News
``filtering``      Sec. 4.1 label filtering (``min_label_count``)
``split``          the seeded split that keeps every label in train
``statistics``     label statistics logged with a sweep (``data_stats.json``)
``prepare``        ``data: {task: multilabel}`` for a sweep: source → split → filter → tokens → cache
=================  ==========================================================================

Tables have the columns ``text`` (string) and ``labels`` (``list<int32>``: the sorted, distinct
label ids of the document, possibly empty); the label names travel beside the table as a list
whose position is the id. Paper references are to abalone_multilabel.txt (Audibert et al.;
docs/architecture.md lists the papers): label filtering is its Sec. 4.1, the head/tail
vocabulary its Sec. 1 and 3.2.
"""

from contrasweep.data.multilabel.bbc import (
    BBC_N_DOCS,
    BBC_PASSAGE_SENTENCES,
    BBC_TOPICS_PER_DOC,
    BBC_ZIPF_EXPONENT,
    BBCMultilabel,
    bbc_multilabel,
)
from contrasweep.data.multilabel.filtering import LabelFilter, filter_labels
from contrasweep.data.multilabel.labels import LABELS_TYPE, label_table, multi_hot, sort_names
from contrasweep.data.multilabel.read import SEPARATORS, parse_multilabel_table, read_multilabel
from contrasweep.data.multilabel.split import split_multilabel
from contrasweep.data.multilabel.statistics import label_statistics

__all__ = [
    "BBC_N_DOCS",
    "BBC_PASSAGE_SENTENCES",
    "BBC_TOPICS_PER_DOC",
    "BBC_ZIPF_EXPONENT",
    "BBCMultilabel",
    "LABELS_TYPE",
    "SEPARATORS",
    "LabelFilter",
    "bbc_multilabel",
    "filter_labels",
    "label_statistics",
    "label_table",
    "multi_hot",
    "parse_multilabel_table",
    "read_multilabel",
    "sort_names",
    "split_multilabel",
]
