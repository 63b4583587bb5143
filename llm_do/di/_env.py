"""`EnvSettings`: a settings class read from `LLM_DO_*` variables and `.env`, whose bad values raise `InvalidSettings`
naming each variable and the form it expects. `LlmDoSettings`, the built-in toolsets' and the projects' settings
are each one; `read_settings` reads several at once and reports every bad value of all of them."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, get_args

from pydantic import BaseModel, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError as _ParseError

from ..errors import InvalidSettings

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def plain_url(value: str) -> str:
    """A validator: a URL with a scheme."""
    if not _URL.match(value):
        raise ValueError("not a URL with a scheme")
    return value


def secret_url(value: SecretStr) -> SecretStr:
    """A validator: a secret URL with a scheme."""
    plain_url(value.get_secret_value())
    return value


class EnvSettings(BaseSettings):
    """Settings read from `LLM_DO_*` variables and an optional `.env` file (nested models as `LLM_DO_<FIELD>__<PART>`).

    Invalid values raise `InvalidSettings`, naming each variable and the form it expects: a field listed in
    `setting_forms` (of the class or a base) is described by its form and an example.
    """

    model_config = SettingsConfigDict(
        env_prefix="LLM_DO_", env_file=".env", env_file_encoding="utf-8", env_nested_delimiter="__", extra="ignore"
    )

    setting_forms: ClassVar[Mapping[str, tuple[str, str]]] = {}
    """The expected form and an example of each field, for the error messages: `{"max_depth": ("a whole number
    >= 0", "5")}`."""

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
            return
        except ValidationError as error:
            problems = [describe(type(self), item, given=values) for item in error.errors()]
        except _ParseError as error:
            problems = [_describe_parse_error(type(self), error)]
        raise InvalidSettings(problems)  # raised outside `except`: the raw error (and any secret) stays out


def read_settings(*classes: type[BaseSettings]) -> list[BaseSettings]:
    """One instance of each class, read from the environment; `InvalidSettings` lists every bad value of all of
    them (a variable two classes read is listed once)."""
    read: list[BaseSettings] = []
    problems: list[str] = []
    for cls in classes:
        try:
            read.append(cls())
        except InvalidSettings as error:
            problems.extend(problem for problem in error.problems if problem not in problems)
    if problems:
        raise InvalidSettings(problems)
    return read


def _forms(cls: type[BaseSettings]) -> Mapping[str, tuple[str, str]]:
    """The `setting_forms` of a class and its bases, the nearest winning."""
    forms: dict[str, tuple[str, str]] = {}
    for klass in reversed(cls.__mro__):
        forms.update(vars(klass).get("setting_forms", {}))
    return forms


def _variable(cls: type[BaseSettings], loc: tuple[int | str, ...]) -> str:
    config = cls.model_config
    field = cls.model_fields.get(str(loc[0]))
    alias = field.validation_alias if field is not None else None
    head = alias if isinstance(alias, str) else f"{config.get('env_prefix', '')}{loc[0]}"
    name = (config.get("env_nested_delimiter") or "__").join([head, *map(str, loc[1:])])
    return name if config.get("case_sensitive") else name.upper()


def _is_secret(cls: type[BaseModel], loc: tuple[int | str, ...]) -> bool:
    """Whether the value at `loc` is (inside) a secret field, or holds one (a model with a secret field, which a
    validator of the whole model fails on), so it must not be shown."""
    annotation: Any = cls
    for part in loc:
        model = next((t for t in (annotation, *get_args(annotation)) if _is_model(t)), None)
        field = None if model is None else model.model_fields.get(str(part))
        if field is None:
            return False
        if "Secret" in repr(field.annotation):
            return True
        annotation = field.annotation
    return _holds_secret(annotation, set())


def _holds_secret(annotation: Any, seen: set[type[BaseModel]]) -> bool:
    """Whether `annotation` is, or names, a model with a secret field at any depth."""
    for model in (t for t in (annotation, *get_args(annotation)) if _is_model(t) and t not in seen):
        seen.add(model)
        for declared in model.model_fields.values():
            if "Secret" in repr(declared.annotation) or _holds_secret(declared.annotation, seen):
                return True
    return False


def _is_model(candidate: Any) -> bool:
    return isinstance(candidate, type) and issubclass(candidate, BaseModel)


def _expected(cls: type[BaseSettings], name: str, loc: tuple[int | str, ...], message: str) -> str:
    form = _forms(cls).get(name) if len(loc) == 1 else None
    if form is not None:
        return f"expected {form[0]}, like {{variable}}={form[1]}"
    text = message.removeprefix("Value error, ")
    text = text.removeprefix("Input should be ").removeprefix("input should be ").split(", unable to")[0]
    field = cls.model_fields.get(name)
    default = field.default if field is not None and len(loc) == 1 else None
    example = f", like {{variable}}={default}" if isinstance(default, str | int | float | Path) else ""
    return f"expected {text}{example}"


def describe(cls: type[BaseSettings], item: Any, *, given: Mapping[str, Any], label: str | None = None) -> str:
    """One line for one of pydantic's validation errors of `cls`: the variable (or `label`), its value (hidden
    when secret) and the form expected."""
    loc: tuple[int | str, ...] = tuple(item["loc"]) or ("?",)
    name = str(loc[0])
    variable = _variable(cls, loc)
    where = label or (".".join(map(str, loc)) if name in given else variable)
    if item["type"] == "missing":
        return f"{where} is required but not set"
    if item["type"] == "extra_forbidden" and len(loc) > 1:
        return f"{where}: no such setting{_parts(cls, loc, variable)}"  # its value unshown: it may be a secret
    expected = _expected(cls, name, loc, str(item["msg"])).format(variable=variable)
    shown = "<hidden>" if _is_secret(cls, loc) else repr(item["input"])
    return f"{where}={shown}: {expected}"


def _parts(cls: type[BaseSettings], loc: tuple[int | str, ...], variable: str) -> str:
    """What may follow the group's variable, for a part it does not have: the closest part, and every part."""
    annotation: Any = cls
    for part in loc[:-1]:
        model = next((t for t in (annotation, *get_args(annotation)) if _is_model(t)), None)
        field = None if model is None else model.model_fields.get(str(part))
        if field is None:
            return ""
        annotation = field.annotation
    model = next((t for t in (annotation, *get_args(annotation)) if _is_model(t)), None)
    if model is None:
        return ""
    delimiter = cls.model_config.get("env_nested_delimiter") or "__"
    group = variable.rpartition(delimiter)[0] + delimiter
    names = [name.upper() for name in model.model_fields]
    close = difflib.get_close_matches(str(loc[-1]).upper(), names, n=1)
    hint = f" (did you mean {group}{close[0]}?)" if close else ""
    return f"{hint}; {group} is followed by one of {', '.join(names)}"


def _describe_parse_error(cls: type[BaseSettings], error: _ParseError) -> str:
    match = re.search(r'field "([^"]+)"', str(error))
    field = match.group(1) if match else "?"
    variable = _variable(cls, (field,))
    delimiter = cls.model_config.get("env_nested_delimiter") or "__"
    return f"{variable} could not be parsed: expected JSON, or one variable per part like {variable}{delimiter}<PART>"
