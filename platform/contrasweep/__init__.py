"""contrasweep: Ray-distributed hyperparameter search for contrastive text classification."""

__version__ = "0.1.0"
