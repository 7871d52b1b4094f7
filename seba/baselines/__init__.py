"""The baselines. Each is one module, ``seba/baselines/<name>.py``, that holds all of it: its
params class (the ``baselines.<name>`` section of params.yaml, defaults written once), its row in
the paper's tables, and its method class (a ``seba.baselines.base.Method``, registered with
``@register``), which gets one seed's standardised table at a time: ``fit`` sees the unlabeled
train and validation parts (self- and semi-supervised methods learn from them; supervised ones
ignore them), then ``scores`` gets the test part and a batch of episodes (support positions and
labels, from ``seba.episodes.sample_episodes``, the sampler SeBA's evaluation uses) and returns
class scores for every test row: [episodes, rows, classes]. The stage takes the argmax and scores
the query rows exactly as for SeBA.

Every module of this folder but ``base.py`` is a method, named by its file
(``seba.core.config.baseline_names``); ``baselines.methods`` in params.yaml picks the ones that run, in
the order of the report's tables. A method's module is the only method code its DVC stage depends
on (``base.load_method`` imports it alone): editing one method reruns only that method's stages.
``seba-validate`` (the `validate` stage, ahead of every other) checks every method's section
before any work; the other stages neither read the sections nor import method code.

Add a method: its module and its section in params.yaml, which repeats the params class's
defaults as the values to edit (tests/test_config.py checks they agree); see
docs/adding-a-method.md.
"""

from seba.core.errors import ConfigError

# The method classes of the modules imported so far, by name (``register`` fills it).
METHODS: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator of a method: its ``name`` is its module's name, and it has a params class
    (``Config``) and its row in the paper's tables (``paper_name``, None if the paper has none)."""
    module = cls.__module__.rsplit(".", 1)[-1]
    if cls.name != module:
        raise ConfigError(f"baseline class {cls.__qualname__}: its name '{cls.name}' must be its module's, "
                          f"'{module}' (seba/baselines/<name>.py)")
    if not hasattr(getattr(cls, "Config", None), "__pydantic_fields__"):
        raise ConfigError(f"baseline '{cls.name}': its class needs `Config`, its params class (a seba.core.schema.section)")
    if not hasattr(cls, "paper_name"):
        raise ConfigError(f"baseline '{cls.name}': its class needs `paper_name` (its row in the paper's tables, or None)")
    METHODS[cls.name] = cls
    return cls
