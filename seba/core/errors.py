"""User-facing error types: each message names the key, dataset or file at fault."""


class ConfigError(ValueError):
    """A user error in params.yaml: the message names the key and what is allowed."""


class DataError(RuntimeError):
    """A dataset cannot be fetched or used; the message names the dataset and the cause."""


class EpisodeError(ValueError):
    """The test part cannot serve the asked shot."""


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


class EncoderCollapsed(TrainingDiverged):
    """Training ended without a usable encoder: its validation loss never improved on the first
    epoch's, or its outputs no longer depend on the input (seba.health)."""


class OutputError(RuntimeError):
    """An output cannot be written (full disk, file size limit, read-only file system); the
    message names the file, and the earlier version of it is kept."""


class ExecutorError(RuntimeError):
    """A piece of a stage run elsewhere (a Ray task) failed or was lost; the message names the
    piece (dataset, seeds) and the cause."""
