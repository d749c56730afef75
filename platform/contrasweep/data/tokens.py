"""Tokenisation (once per sweep) and the tokenizer's identity for the cache key."""

from __future__ import annotations

import hashlib
import os

import pyarrow as pa

from trainables.encoder_names import resolve_model_path

# Files that define what a Hugging Face tokenizer produces; hashed for the cache key.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
)


def tokenizer_identity(name: str | None) -> str:
    """A hash of the tokenizer's files, computed without loading the tokenizer.

    A local directory (``default`` resolves to one) is identified by its files' content
    only, so the same tokenizer at two paths shares the cache. A hub name is identified by
    the name plus whichever of its files are already in the local Hugging Face cache. The
    ``tokenizers``/``transformers`` versions are included: an upgrade may change the ids.
    """
    path = resolve_model_path(name)
    digest = hashlib.sha256(_versions().encode())
    if os.path.isdir(path):
        files: list[tuple[str, str | None]] = [(f, os.path.join(path, f)) for f in TOKENIZER_FILES]
    else:
        digest.update(f"hub:{path}".encode())
        files = [(f, _hub_cached(path, f)) for f in TOKENIZER_FILES]
    for fname, fpath in files:
        if fpath and os.path.isfile(fpath):
            digest.update(fname.encode())
            with open(fpath, "rb") as handle:
                digest.update(handle.read())
    return digest.hexdigest()


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for package in ("tokenizers", "transformers"):
        try:
            found.append(f"{package}=={version(package)}")
        except PackageNotFoundError:  # pragma: no cover - both are dependencies
            found.append(f"{package}==?")
    return ",".join(found)


def _hub_cached(repo: str, filename: str) -> str | None:
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(repo, filename)
    except Exception:  # noqa: BLE001 - a malformed repo name only means "not cached"
        return None
    return found if isinstance(found, str) else None


def tokenize_splits(splits: dict[str, pa.Table], tokenizer, max_length: int, is_pair: bool, fingerprint: str):
    """Tokenise every split (batched ``datasets.map``, truncation, no padding: batches are
    padded dynamically by ``collate_numpy``) into a ``DatasetDict`` with columns
    ``input_ids`` (list<int32>), ``token_type_ids`` (list<int8>; zeros for single texts),
    ``labels`` (int64)."""
    from datasets import Dataset, DatasetDict, Features, List, Value

    features = Features(
        {"input_ids": List(Value("int32")), "token_type_ids": List(Value("int8")), "labels": Value("int64")}
    )

    def encode(batch):
        pair = batch["text_pair"] if is_pair else None
        enc = tokenizer(
            batch["text"],
            pair,
            truncation=True,
            max_length=max_length,
            return_token_type_ids=True,
            return_attention_mask=False,
        )
        return {"input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"], "labels": batch["label"]}

    out = {}
    for split, table in splits.items():
        out[split] = Dataset(table).map(
            encode,
            batched=True,
            batch_size=1000,
            remove_columns=table.column_names,
            features=features,
            # num_proc=None runs in this process; datasets 5 forks a worker pool even for num_proc=1.
            keep_in_memory=True,
            num_proc=None,
            desc=f"tokenise {split}",
            # A fixed fingerprint: hashing the closure (it holds the tokenizer) is slow and noisy.
            new_fingerprint=hashlib.sha256(f"{fingerprint}:{split}".encode()).hexdigest()[:16],
        )
    return DatasetDict(out)
