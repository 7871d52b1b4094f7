"""SeBA (Separated-at-Birth Alignment): self-supervised pretraining for semi-supervised
few-shot classification of tabular data, as a reproducible DVC + MLflow pipeline."""

__version__ = "0.1.0"
