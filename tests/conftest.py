"""Shared fixtures: a tiny random BERT saved as a real Hugging Face model directory (no
download; the tokenizer is the bundled MiniLM's), isolated caches and stores per test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def build_tiny_bert(directory: Path) -> Path:
    """Save a 2-layer, 32-wide BERT with random weights and the MiniLM tokenizer."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from trainables.encoder import resolve_model_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("default"))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    import torch

    torch.manual_seed(0)
    BertModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    return str(build_tiny_bert(tmp_path_factory.mktemp("tiny-bert")))


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("CONTRASWEEP_CACHE", str(path))
    return path


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray for the whole suite (2 CPUs: this machine), started with an explicit
    address so it never attaches to a cluster someone else started here."""
    import ray

    from contrasweep.run.ray_start import init_ray

    init_ray(None, num_cpus=2)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def s3_endpoint():
    """A real S3 server on 127.0.0.1 (moto's, in a thread of this process) for the tests of
    ``storage: s3://…``; yields ``host:port``."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"{host}:{port}"
    server.stop()


@pytest.fixture()
def s3_storage(s3_endpoint, tmp_path) -> str:
    """An ``s3://`` storage URI in a bucket of its own (credentials and endpoint in the URI, so
    that Ray workers started before the test reach it too)."""
    from pyarrow import fs

    bucket = "t" + format(abs(hash(str(tmp_path))), "x")[:20]
    uri = f"s3://testing:testing@{bucket}/sweeps?endpoint_override={s3_endpoint}&scheme=http&region=us-east-1"
    fs.S3FileSystem(access_key="testing", secret_key="testing", endpoint_override=s3_endpoint, scheme="http",
                    region="us-east-1", allow_bucket_creation=True).create_dir(bucket)  # users bring their bucket
    return uri


def write_spec(path: Path, model_dir: str, **sections) -> Path:
    """A small sweep spec on the tiny BERT and BBC News few-shot."""
    import yaml

    spec = {
        "method": "ce",
        "data": {"source": "bbc_news", "protocol": "few_shot", "k": 4, "test_fraction": 0.05},
        "encoder": {"name": model_dir, "pooling": "mean", "max_length": 32},
        "reported": {"lr": 1.0e-3},
        "grid": {"lr": [1.0e-3, 1.0e-4]},
        "fixed": {"epochs": 3, "batch_size": 8, "warmup_ratio": 0.0},
        "sweep": {"searcher": "grid", "metric": "val/accuracy", "mode": "max", "scheduler": "asha",
                  "seeds": [0, 1], "max_concurrent": 2, "resources": {"cpu": 1}},
        "tracking": {"experiment": "tests"},
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(spec.get(key), dict):
            spec[key] = {**spec[key], **value}
        else:
            spec[key] = value
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path
