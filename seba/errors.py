"""User-facing error types: each message names the key, dataset or file at fault."""


class ConfigError(ValueError):
    """A user error in params.yaml: the message names the key and what is allowed."""


class DataError(RuntimeError):
    """A dataset cannot be fetched or used; the message names the dataset and the cause."""


class EpisodeError(ValueError):
    """The test part cannot serve the asked shot."""


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""
