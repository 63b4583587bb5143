"""Settings: environment, `.env`, nested values, secrets, readable errors, and the runtime config built from them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path

import pytest
from dependency_injector import containers, providers
from pydantic import BaseModel, SecretStr, model_validator
from pydantic_ai import Agent
from pydantic_settings import BaseSettings

from containers import AgentContainer, BuiltinToolsets
from llm_do import AgentEntry, InvalidSettings, LlmDoSettings, Runtime, RuntimeConfig, reveal
from llm_do.testing import ScriptedModel, override
from llm_do.toolsets import ToolsetSettings

ROOT = Path(__file__).parents[2]
FIX = "Fix the value (environment, .env file or container config), or unset it."


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No LLM_DO_* variable or .env file from outside the test."""
    for variable in [v for v in os.environ if v.upper().startswith("LLM_DO_")]:
        monkeypatch.delenv(variable)
    monkeypatch.chdir(tmp_path)
    yield


class PoolSettings(BaseModel):
    size: int = 4
    password: SecretStr | None = None


class AppSettings(LlmDoSettings):
    pool: PoolSettings = PoolSettings()
    greeting: str = "hello"


class Database:
    def __init__(self, url: str | None, pool_size: int, depth: int) -> None:
        self.url = url
        self.pool_size = pool_size
        self.depth = depth


class App(AgentContainer):
    settings_class = AppSettings
    database = providers.Singleton(
        Database,
        url=reveal(AgentContainer.config.database_url),
        pool_size=AgentContainer.config.pool.size,
        depth=AgentContainer.config.max_depth,
    )


def test_defaults_and_every_field_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    defaults = LlmDoSettings()
    assert (defaults.model, defaults.max_depth, defaults.approval_mode, defaults.cleanup_timeout) == (
        None,
        5,
        "prompt",
        10.0,
    )
    assert (defaults.project_root, defaults.database_url) == (Path("."), None)
    for name, value in {
        "MODEL": "anthropic:claude-sonnet-4-5",
        "MAX_DEPTH": "2",
        "APPROVAL_MODE": "reject_all",
        "CLEANUP_TIMEOUT": "2.5",
        "PROJECT_ROOT": str(tmp_path),
        "DATABASE_URL": "postgresql://app:s3cret@db/app",
    }.items():
        monkeypatch.setenv(f"LLM_DO_{name}", value)
    settings = LlmDoSettings()
    assert settings.model == "anthropic:claude-sonnet-4-5"
    assert (settings.max_depth, settings.approval_mode, settings.cleanup_timeout) == (2, "reject_all", 2.5)
    assert settings.project_root == tmp_path
    assert settings.database_url is not None
    assert settings.database_url.get_secret_value() == "postgresql://app:s3cret@db/app"


def test_dotenv_is_read_and_the_environment_wins_over_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("LLM_DO_MAX_DEPTH=3\nLLM_DO_MODEL=test\nLLM_DO_POOL__SIZE=9\n")
    assert (LlmDoSettings().max_depth, LlmDoSettings().model) == (3, "test")
    assert AppSettings().pool.size == 9, "nested values use __ in .env too"
    monkeypatch.setenv("LLM_DO_MAX_DEPTH", "1")
    assert (LlmDoSettings().max_depth, LlmDoSettings().model) == (1, "test")


def test_a_bad_variable_names_itself_and_the_expected_form(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_DO_MAX_DEPTH", "deep")
    with pytest.raises(InvalidSettings) as raised:
        LlmDoSettings()
    assert str(raised.value) == (
        f"invalid setting LLM_DO_MAX_DEPTH='deep': expected a whole number >= 0, like LLM_DO_MAX_DEPTH=5\n{FIX}"
    )
    assert raised.value.__cause__ is None and raised.value.__context__ is None, "no raw validation dump attached"


def test_a_variable_naming_no_part_of_a_group_says_so_and_names_the_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_DO_LIMITS__MAX_TOKEN", "5")
    monkeypatch.setenv("LLM_DO_ATTACHMENTS__MAX_FILE", "5")  # was ignored: the limit the person meant did not hold
    monkeypatch.setenv("LLM_DO_FILESYSTEM__MAX_READ", "5")
    with pytest.raises(InvalidSettings) as raised:
        ToolsetSettings()
    assert raised.value.problems == (
        "LLM_DO_FILESYSTEM__MAX_READ: no such setting (did you mean LLM_DO_FILESYSTEM__MAX_READ_BYTES?); "
        "LLM_DO_FILESYSTEM__ is followed by one of MAX_READ_BYTES, MAX_WRITE_BYTES, MAX_ENTRIES, MAX_SCANNED, "
        "ALLOW_HARD_LINKS",
    )
    with pytest.raises(InvalidSettings) as raised:
        LlmDoSettings()
    assert raised.value.problems == (
        "LLM_DO_ATTACHMENTS__MAX_FILE: no such setting (did you mean LLM_DO_ATTACHMENTS__MAX_FILES?); "
        "LLM_DO_ATTACHMENTS__ is followed by one of MAX_FILE_BYTES, MAX_TEXT_BYTES, MAX_CALL_BYTES, MAX_FILES, "
        "ALLOW_HARD_LINKS",
        "LLM_DO_LIMITS__MAX_TOKEN: no such setting (did you mean LLM_DO_LIMITS__MAX_TOKENS?); LLM_DO_LIMITS__ is "
        "followed by one of MAX_TOKENS, REQUEST_TIMEOUT, RUN_TIMEOUT, RUN_REQUESTS, RUN_TOKENS, REPEATED_CALLS",
    )


def test_every_bad_variable_is_listed_and_secrets_are_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_DO_MODEL", "gpt")
    monkeypatch.setenv("LLM_DO_APPROVAL_MODE", "sometimes")
    monkeypatch.setenv("LLM_DO_CLEANUP_TIMEOUT", "0")
    monkeypatch.setenv("LLM_DO_PROJECT_ROOT", "/no/such/directory")
    monkeypatch.setenv("LLM_DO_DATABASE_URL", "hunter2")
    monkeypatch.setenv("LLM_DO_POOL__SIZE", "big")
    with pytest.raises(InvalidSettings) as raised:
        AppSettings()
    assert raised.value.problems == (
        "LLM_DO_MODEL='gpt': expected provider:model-name, like LLM_DO_MODEL=openai:gpt-5.2",
        "LLM_DO_APPROVAL_MODE='sometimes': expected one of prompt, approve_all, reject_all, "
        "like LLM_DO_APPROVAL_MODE=prompt",
        "LLM_DO_CLEANUP_TIMEOUT='0': expected a number of seconds > 0, like LLM_DO_CLEANUP_TIMEOUT=10",
        "LLM_DO_PROJECT_ROOT='/no/such/directory': expected an existing directory, "
        "like LLM_DO_PROJECT_ROOT=/path/to/project",
        "LLM_DO_DATABASE_URL=<hidden>: expected a URL with a scheme, like LLM_DO_DATABASE_URL=sqlite:///data/app.db",
        "LLM_DO_POOL__SIZE='big': expected a valid integer",
    )
    assert "hunter2" not in str(raised.value)


def test_a_nested_secret_is_hidden_when_it_is_invalid(monkeypatch: pytest.MonkeyPatch) -> None:
    class Strict(BaseModel):
        token: SecretStr

    class WithToken(LlmDoSettings):
        api: Strict

    monkeypatch.setenv("LLM_DO_API", '{"token": 12345}')
    with pytest.raises(InvalidSettings) as raised:
        WithToken()
    assert raised.value.problems == ("LLM_DO_API__TOKEN=<hidden>: expected a valid string",)
    monkeypatch.delenv("LLM_DO_API")
    with pytest.raises(InvalidSettings, match="LLM_DO_API is required but not set"):
        WithToken()


def test_a_group_of_settings_holding_a_secret_is_hidden_when_it_is_invalid_as_a_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A validator of the whole group (or a value of the wrong shape) fails on the group: its value, secret
    included, is not shown; a plain field of it still is."""

    class Credentials(BaseModel):
        password: SecretStr

    class Pool(BaseModel):
        size: int = 4
        login: Credentials | None = None

        @model_validator(mode="after")
        def _bounded(self) -> Pool:
            if self.size > 100:
                raise ValueError("a size of at most 100")
            return self

    class WithPool(LlmDoSettings):
        pool: Pool = Pool()

    problems = []
    for given in (
        '{"login": {"password": "s3cret"}, "size": 1000}',
        '["s3cret"]',
        '{"login": {"password": "s3cret"}, "size": "x"}',
    ):
        monkeypatch.setenv("LLM_DO_POOL", given)
        with pytest.raises(InvalidSettings) as raised:
            WithPool()
        problems.extend(raised.value.problems)
    assert problems == [
        "LLM_DO_POOL=<hidden>: expected a size of at most 100",
        "LLM_DO_POOL=<hidden>: expected a valid dictionary or instance of Pool",
        "LLM_DO_POOL__SIZE='x': expected a valid integer",
    ]


def test_secrets_are_never_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_DO_DATABASE_URL", "postgresql://app:s3cret@db/app")
    monkeypatch.setenv("LLM_DO_POOL__PASSWORD", "s3cret")
    app = App()
    shown = [repr(AppSettings()), str(AppSettings()), repr(app.config()), str(app.config())]
    assert all("s3cret" not in text for text in shown)
    assert str(app.config.database_url()) == "**********"
    assert app.database().url == "postgresql://app:s3cret@db/app", "reveal() hands the text to the provider"


def test_container_settings_load_at_creation_not_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_DO_MAX_DEPTH", "deep")
    code = (
        "import containers\n"
        "from llm_do import InvalidSettings\n"
        "print('imported')\n"
        "try:\n"
        "    containers.AgentContainer()\n"
        "except InvalidSettings as error:\n"
        "    print(error.problems[0])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.splitlines() == [
        "imported",
        "LLM_DO_MAX_DEPTH='deep': expected a whole number >= 0, like LLM_DO_MAX_DEPTH=5",
    ]
    monkeypatch.setenv("LLM_DO_MAX_DEPTH", "4")
    first = App()
    monkeypatch.setenv("LLM_DO_MAX_DEPTH", "6")
    assert (first.config.max_depth(), App().config.max_depth()) == (4, 6), "each container reads the environment"


def test_own_settings_class_fields_reach_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_DO_POOL__SIZE", "8")
    monkeypatch.setenv("LLM_DO_GREETING", "hi")
    monkeypatch.setenv("LLM_DO_MAX_DEPTH", "2")
    app = App()
    database = app.database()
    assert (database.pool_size, database.depth, database.url) == (8, 2, None)
    assert app.config.greeting() == "hi"
    assert AgentContainer().config.greeting() is None, "the base container keeps LlmDoSettings"
    monkeypatch.setenv("LLM_DO_POOL__SIZE", "many")
    with pytest.raises(InvalidSettings, match=r"^invalid setting LLM_DO_POOL__SIZE='many': expected a valid integer"):
        App()


def test_runtime_config_prefers_the_container_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_DO_MAX_DEPTH", "2")
    monkeypatch.setenv("LLM_DO_CLEANUP_TIMEOUT", "3")
    app = App()
    assert (Runtime(app).config.max_depth, Runtime(app).config.cleanup_timeout) == (2, 3.0)
    assert Runtime(None).config.max_depth == 2, "without a container the environment is read"
    app.config.max_depth.from_value(1)
    assert Runtime(app).config.max_depth == 1, "the container's config wins over the environment"
    with override(app.config.max_depth, 0):
        assert Runtime(app).config.max_depth == 0
    explicit = RuntimeConfig(max_depth=7)
    assert Runtime(app, config=explicit).config is explicit, "an explicit config wins"
    built = RuntimeConfig.from_container(app, max_depth=9, approval_mode="approve_all")
    assert (built.max_depth, built.cleanup_timeout, built.approval_mode) == (9, 3.0, "approve_all")
    assert RuntimeConfig.from_settings(LlmDoSettings(max_depth=4), cleanup_timeout=1).cleanup_timeout == 1


def test_a_container_without_llm_do_settings_falls_back_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    class Plain(containers.DeclarativeContainer):
        config = providers.Configuration()

    monkeypatch.setenv("LLM_DO_MAX_DEPTH", "3")
    plain = Plain()
    assert Runtime(plain).config.max_depth == 3
    plain.config.from_dict({"max_depth": "1", "unrelated": True})
    config = Runtime(plain).config
    assert (config.max_depth, config.cleanup_timeout) == (1, 10.0), "values are validated and coerced"


def test_a_bad_value_set_in_code_is_reported_like_a_variable() -> None:
    app = App()
    app.config.max_depth.from_value(-1)
    app.config.approval_mode.from_value("maybe")
    with pytest.raises(InvalidSettings) as raised:
        Runtime(app)
    assert raised.value.problems == (
        "config.max_depth=-1: expected a whole number >= 0, like LLM_DO_MAX_DEPTH=5",
        "config.approval_mode='maybe': expected one of prompt, approve_all, reject_all, "
        "like LLM_DO_APPROVAL_MODE=prompt",
    )


async def test_the_model_setting_reaches_agents_without_a_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_DO_MODEL", "test")
    bare = AgentEntry(Agent(), name="bare")
    async with Runtime(App(), entries=[bare]) as runtime:
        assert runtime.config.model == "test"
        assert (await runtime.run("bare", "hi")).output == "success (no tool calls)"
    app = App()
    app.config.model.from_value(ScriptedModel("from a model object"))
    async with Runtime(app, entries=[bare]) as runtime:
        assert (await runtime.run("bare", "hi")).output == "from a model object"


def test_a_value_given_in_code_is_named_by_its_field_and_unparsable_json_by_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(InvalidSettings) as raised:
        LlmDoSettings(max_depth=-2)
    assert raised.value.problems == ("max_depth=-2: expected a whole number >= 0, like LLM_DO_MAX_DEPTH=5",)

    class Required(BaseModel):
        size: int

    class WithPool(LlmDoSettings):
        pool: Required = Required(size=1)

    monkeypatch.setenv("LLM_DO_POOL", "{not json")
    with pytest.raises(InvalidSettings) as raised:
        WithPool()
    assert raised.value.problems == (
        "LLM_DO_POOL could not be parsed: expected JSON, or one variable per part like LLM_DO_POOL__<PART>",
    )


TOOLSETS_FIELDS = {
    "filesystem",
    "sql_statement_timeout",
    "sql_pool_size",
    "sql_max_rows",
    "sql_max_bytes",
    "shell_allow",
    "shell_timeout",
}
PROJECT_FIELDS = {"openai_base_url", "openai_api_key"}


def settings_classes() -> dict[str, type[BaseSettings]]:
    """Every settings class llm-do declares, by its public name (the jobs' and the command's where their extras are
    installed: `make test-lowest` has neither)."""
    classes: dict[str, type[BaseSettings]] = {"LlmDoSettings": LlmDoSettings, "ToolsetSettings": ToolsetSettings}
    if find_spec("procrastinate") is not None:
        from llm_do.jobs import JobSettings

        classes["JobSettings"] = JobSettings
    if find_spec("yaml") is not None:
        from llm_do.project import ProjectSettings

        classes["ProjectSettings"] = ProjectSettings
    return classes


def test_the_library_settings_hold_what_the_library_reads_and_the_toolsets_have_their_own() -> None:
    assert set(LlmDoSettings.model_fields) & (TOOLSETS_FIELDS | PROJECT_FIELDS) == set()
    assert set(ToolsetSettings.model_fields) == TOOLSETS_FIELDS
    assert "database_url" in LlmDoSettings.model_fields, "the application's database: jobs, web and apps read it"


def test_the_builtin_toolsets_read_their_settings_beside_the_applications_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """`BuiltinToolsets` reads `ToolsetSettings` into the one `config`, whatever `settings_class` a subclass
    names, so providers written against `AgentContainer.config.<field>` see the values."""
    monkeypatch.setenv("LLM_DO_SQL_MAX_ROWS", "7")
    monkeypatch.setenv("LLM_DO_SHELL_ALLOW", "git, ls")
    monkeypatch.setenv("LLM_DO_FILESYSTEM__MAX_WRITE_BYTES", "99")
    monkeypatch.setenv("LLM_DO_GREETING", "hi")

    class Tools(BuiltinToolsets):
        settings_class = AppSettings

    app = Tools()
    assert (app.config.sql_max_rows(), app.config.shell_allow(), app.config.greeting()) == (7, ["git", "ls"], "hi")
    assert app.filesystem().max_write_bytes == 99
    assert list(app.shell().rules) == ["git", "ls"]
    assert AgentContainer().config.sql_max_rows() is None, "a container without the built-ins does not read them"

    class Mine(AgentContainer):
        builtin_settings = (ToolsetSettings,)

    assert Mine().config.sql_max_rows() == 7, "a container of one's own reads them by naming the class"


def test_a_bad_value_of_any_settings_class_stops_the_container_that_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_DO_SQL_POOL_SIZE", "0")
    monkeypatch.setenv("LLM_DO_SHELL_ALLOW", "rm -rf")
    assert AgentContainer().config.max_depth() == 5, "the library reads none of the toolsets' settings"
    assert Runtime(None).config.max_depth == 5
    monkeypatch.setenv("LLM_DO_MAX_DEPTH", "deep")
    with pytest.raises(InvalidSettings) as raised:
        BuiltinToolsets()
    assert raised.value.problems == (
        "LLM_DO_MAX_DEPTH='deep': expected a whole number >= 0, like LLM_DO_MAX_DEPTH=5",
        "LLM_DO_SQL_POOL_SIZE='0': expected a whole number >= 1, like LLM_DO_SQL_POOL_SIZE=5",
        "LLM_DO_SHELL_ALLOW='rm -rf': expected program names or absolute paths, separated by commas (or a JSON "
        "list), like LLM_DO_SHELL_ALLOW=git,ls,rg",
    )


def test_the_configuration_page_lists_every_setting_of_every_class() -> None:
    """docs/configuration.md has a table for each settings class, with a row for each of its fields (the second
    column), and no row for a field no class has; the jobs' own settings are in docs/jobs.md's table."""
    docs = Path(__file__).parents[2] / "docs"
    page = (docs / "configuration.md").read_text()
    classes = settings_classes()
    jobs = classes.pop("JobSettings", None)
    tables: dict[str, set[str]] = {}
    table: set[str] | None = None
    for line in page.splitlines():
        if line.startswith("#"):
            table = None
        named = [name for name in classes if f"`{name}`" in line and line.startswith("#")]
        if named:
            table = tables.setdefault(named[0], set())
        if line.startswith("| `LLM_DO_") and table is not None:
            table.add(line.split("|")[2].strip().strip("`"))
    for name, cls in classes.items():
        assert tables.get(name) == set(cls.model_fields), f"{name}: the table of its heading lists its fields"
    if jobs is not None:
        own = set(jobs.model_fields) - set(LlmDoSettings.model_fields)
        rows = (docs / "jobs.md").read_text().splitlines()
        assert sorted(own - {line.split("`")[1].lower() for line in rows if line.startswith("| `")}) == []
