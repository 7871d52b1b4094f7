"""The checked-section machinery of ``params.yaml``, on pydantic.

A section of params.yaml is a frozen pydantic dataclass declared with ``@section``: its fields,
types and defaults are written once, in the class; pydantic checks the types (strictly: no
``"5"`` for 5, no ``true`` for 1) and rejects unknown keys. ``check(cls, raw, name)`` validates a
mapping against a section and turns pydantic's first error into one line that names the key in
full (``pretrain.lr``, ``baselines.scarf.epochs``) and, for an unknown key, suggests the
closest known one. The constrained types below (``PositiveInt``, ``Fraction``, ``choice(...)``
...) carry their own messages.
"""

import dataclasses
import difflib
import typing
from typing import Annotated, Any

import pydantic
from pydantic import AfterValidator, BeforeValidator, ConfigDict, Strict
from pydantic_core import PydanticCustomError

from seba.core.errors import ConfigError

# Unknown keys are errors; numbers are finite. Scalars are checked strictly (the types below):
# no "5" for 5, no true for 1, no 5.0 for an integer; an integer is a valid float.
CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)
Int = Annotated[int, Strict()]
Float = Annotated[float, Strict()]
Bool = Annotated[bool, Strict()]
Str = Annotated[str, Strict()]


def section(cls: type) -> type:
    """A frozen, checked params section (a pydantic dataclass; ``dataclasses`` functions apply)."""
    return pydantic.dataclasses.dataclass(frozen=True, config=CONFIG)(cls)


def fail(text: str) -> PydanticCustomError:
    """A failed check; ``text`` follows the key's name in the message ("must be > 0, got 0")."""
    return PydanticCustomError("seba", "{text}", {"text": text})


def rule(ok, text: str) -> AfterValidator:
    """A check of a value that already has its type: ``ok(value)``, else ``text`` and the value."""

    def check(value):
        if not ok(value):
            raise fail(f"{text}, got {value!r}")
        return value

    return AfterValidator(check)


def choice(*options: str) -> Any:
    """A string that is one of ``options``."""

    def check(value):
        if value not in options:
            raise fail(f"is {value!r}; allowed: {', '.join(options)}")
        return value

    return Annotated[str, Strict(), AfterValidator(check)]


def at_most(limit: int) -> AfterValidator:
    return rule(lambda v: v <= limit, f"must be <= {limit}")


def _non_empty_list(kinds: tuple[type, ...], convert: type, what: str, empty: bool = False) -> BeforeValidator:
    """A non-empty list (or tuple; ``empty``: possibly empty) of ``kinds`` (never booleans), as a
    tuple of ``convert``."""

    def check(value):
        if (not isinstance(value, (list, tuple)) or not (value or empty)
                or not all(isinstance(v, kinds) and not isinstance(v, bool) for v in value)):
            raise fail(f"must be a{'' if empty else ' non-empty'} list of {what}, got {value!r}")
        return tuple(convert(v) for v in value)

    return BeforeValidator(check)


positive = rule(lambda v: v > 0, "must be > 0")
PositiveInt = Annotated[int, Strict(), positive]
PositiveFloat = Annotated[float, Strict(), positive]
Fraction = Annotated[float, Strict(), rule(lambda v: 0 < v <= 1, "must lie in (0, 1]")]
Ints = Annotated[tuple[int, ...], _non_empty_list((int,), int, "integers")]
IntsOrNone = Annotated[tuple[int, ...], _non_empty_list((int,), int, "integers", empty=True)]  # [] allowed
Numbers = Annotated[tuple[float, ...], _non_empty_list((int, float), float, "numbers")]
# the batch of a contrastive loss, which scores each row against the others of its batch
PairBatch = Annotated[int, Strict(), rule(lambda v: v >= 2, "must be at least 2 (a contrastive loss compares each "
                                                              "row with the others of its batch)")]

TYPE_ERRORS = {"int_type": "an integer", "float_type": "a number", "finite_number": "a finite number",
               "bool_type": "true or false", "string_type": "a string"}


def unknown_key(section_name: str, raw: dict, allowed: list[str]) -> None:
    """A ConfigError for the first key of ``raw`` not in ``allowed``, with the closest known one."""
    for key in raw:
        if key not in allowed:
            where = f"{section_name}.{key}" if section_name else str(key)
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"params.yaml: unknown key '{where}'{hint}; allowed here: {', '.join(allowed)}")


def check(cls: type, raw: Any, name: str) -> Any:
    """``raw`` (a mapping, or None for all defaults) as a ``cls`` section, or a ConfigError that
    names the key under ``name`` ('' for the whole file)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"params.yaml: '{name}' must be a mapping of keys to values")
    try:
        return cls.__pydantic_validator__.validate_python(raw)
    except pydantic.ValidationError as exc:
        raise _message(exc.errors(), cls, raw, name) from None


def mapping_or_empty(value: Any) -> Any:
    """A section left empty in YAML (``pretrain:``) takes all its defaults."""
    return {} if value is None else value


def _fields(cls: Any) -> tuple[list[str], dict[str, Any]]:
    while typing.get_origin(cls) is Annotated:
        cls = typing.get_args(cls)[0]
    return [f.name for f in dataclasses.fields(cls)], {f.name: f.type for f in dataclasses.fields(cls)}


def _message(errors: list[dict], cls: type, raw: dict, name: str) -> ConfigError:
    """The first of pydantic's errors (an unknown key before any other) as one line."""
    unknown = [e for e in errors if e["type"] in ("unexpected_keyword_argument", "extra_forbidden", "invalid_key")]
    error = (unknown or errors)[0]
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, ConfigError):  # a check that wrote its own message
        return cause
    *parents, last = error["loc"] or ("",)
    owner, node = cls, raw  # the section that holds the key, and its raw mapping
    for key in parents:
        owner, node = _fields(owner)[1][key], (node.get(key) if isinstance(node, dict) else None) or {}
    full = ".".join(str(k) for k in [name, *parents, last] if k != "")
    value = node.get(last, error.get("input")) if isinstance(node, dict) else error.get("input")
    if unknown:
        unknown_key(".".join(str(k) for k in [name, *parents] if k != ""), {last: None}, _fields(owner)[0])
    kind = error["type"]
    if kind == "seba":
        return ConfigError(f"params.yaml: '{full}' {error['ctx']['text']}")
    if kind in TYPE_ERRORS:
        return ConfigError(f"params.yaml: '{full}' must be {TYPE_ERRORS[kind]}, got {value!r}")
    if kind in ("missing", "missing_argument"):
        return ConfigError(f"params.yaml: missing required key '{full}'")
    if kind in ("dataclass_type", "dataclass_exact_type"):
        return ConfigError(f"params.yaml: '{full}' must be a mapping of keys to values")
    if kind in ("value_error", "assertion_error"):
        return ConfigError(f"params.yaml: {cause}")
    return ConfigError(f"params.yaml: '{full}': {error['msg']}, got {value!r}")
