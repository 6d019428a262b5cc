"""The MLflow Model Registry: register a run's model under a name and point aliases at it.

    >>> from psyattrs.serving.registry import register
    >>> reg = register("3e880bd4bfd7428ca0553253c390c745", "psyattrs-demo")   # alias champion
    >>> reg.uri
    'models:/psyattrs-demo@champion'

`models:/NAME@ALIAS` (and `models:/NAME/VERSION`) then works everywhere a model is accepted:
`psyattrs.predict`, `psyattrs predict/annotate/serve --model`, `mlflow.pyfunc.load_model`.

The registry lives in the tracking store (`tracking_uri`, else MLFLOW_TRACKING_URI, else the
project's `sqlite:///<repo>/mlflow/mlflow.db`, as training uses), so a run and its registered
versions sit side by side.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_ALIAS = "champion"
OWNER_TAG = "psyattrs.registered_by"  # version tag naming who registered it (`register(owner=...)`)
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
_RUNS_URI = re.compile(r"^runs:/([^/]+)(?:/(.+))?$")
_ALIAS = re.compile(r"^[\w\-]{1,255}$")  # MLflow's rule: letters, digits, _ and -
_RESERVED_ALIAS = re.compile(r"^(latest|[vV]\d+)$", re.IGNORECASE)


@dataclass(frozen=True)
class Registration:
    """A registered model version.

    Attributes:
        name: the registered model's name.
        version: the version number (int).
        aliases: the aliases now pointing at this version (those set by the call).
        run_id: the run the model came from ("" when unknown).
        source: the model URI that was registered (`runs:/<run id>/model`).
        tracking_uri: the store holding the registry.
    """

    name: str
    version: int
    aliases: tuple[str, ...]
    run_id: str
    source: str
    tracking_uri: str

    @property
    def uri(self) -> str:
        """`models:/NAME@ALIAS` for the first alias, else `models:/NAME/VERSION`."""
        if self.aliases:
            return f"models:/{self.name}@{self.aliases[0]}"
        return f"models:/{self.name}/{self.version}"


def model_source(run: str) -> tuple[str, str]:
    """The run id and model URI for a run id or a `runs:/` URI.

    Args:
        run: a 32-hex run id, `runs:/RUN_ID` (the model `model` of that run) or
            `runs:/RUN_ID/PATH`.

    Returns:
        (run id, `runs:/RUN_ID/PATH`).

    Raises:
        ValueError: anything else (names the value and the accepted forms).
    """
    if not isinstance(run, str):
        raise TypeError(f"run must be a run id string, got {type(run).__name__}")
    text = run.strip()
    match = _RUNS_URI.match(text)
    if match:
        return match.group(1), f"runs:/{match.group(1)}/{(match.group(2) or 'model').strip('/')}"
    if _RUN_ID.match(text):
        return text, f"runs:/{text}/model"
    raise ValueError(
        f"{run!r} is not a run: give a run id (32 hex digits, printed last by psyattrs train) or runs:/RUN_ID/model"
    )


def _aliases(alias: "str | Sequence[str] | None") -> tuple[str, ...]:
    if alias is None:
        return ()
    items = (alias,) if isinstance(alias, str) else tuple(alias)
    for item in items:
        if not isinstance(item, str) or not _ALIAS.match(item):
            raise ValueError(f"alias {item!r} must be 1-255 letters, digits, '_' or '-'")
        if _RESERVED_ALIAS.match(item):
            raise ValueError(f"alias {item!r} is reserved by MLflow ('latest' and 'v<number>' name versions)")
    return items


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a registered model needs a non-empty name, got {name!r}")
    if "/" in name or "@" in name or ":" in name:
        raise ValueError(f"registered model name {name!r} may not contain '/', '@' or ':' (they delimit model URIs)")
    return name


def _message(exc: Exception) -> str:
    return getattr(exc, "message", None) or str(exc)


def register(
    run: str,
    name: str,
    *,
    alias: "str | Sequence[str] | None" = DEFAULT_ALIAS,
    tracking_uri: str | None = None,
    owner: str | None = None,
) -> Registration:
    """Registers a run's pyfunc model as a new version of `name` and points `alias` at it.

    Args:
        run: the run id (as `psyattrs train` prints it) or a `runs:/RUN_ID/model` URI.
        name: the registered model's name (created if new).
        alias: one alias, several, or None for none; default `champion`. An alias that pointed at
            an older version moves to the new one.
        tracking_uri: the store; None = MLFLOW_TRACKING_URI or the project's store.
        owner: who registers (`make demo` passes `make-demo`): the new version gets the tag
            `OWNER_TAG` = owner, and an alias that already points at a version without that same
            tag is never moved: the call fails before registering anything. None: no check.

    Returns:
        The `Registration` (its `uri` is `models:/NAME@ALIAS`).

    Raises:
        ValueError: no such run in the store, a run that did not finish or holds no model, a bad
            name or alias (MLflow reserves `latest` and `v<number>`), an alias owned by someone
            else (with `owner`).
    """
    import mlflow
    from mlflow.exceptions import MlflowException

    # lazy: scikit-learn via experiments/
    from psyattrs.experiments.stopping import run_end
    from psyattrs.experiments.store import quiet_mlflow, tracking_store

    run_id, source = model_source(run)
    name = _check_name(name)
    aliases = _aliases(alias)
    with tracking_store(tracking_uri) as uri, quiet_mlflow():
        client = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
        try:
            found = client.get_run(run_id)
        except MlflowException:
            raise ValueError(f"no run {run_id!r} in the tracking store {uri}") from None
        info = found.info
        if info.status != "FINISHED":
            raise ValueError(f"run {run_id} {run_end(info.status, found.data.tags)}; "
                             "only a FINISHED run's model can be registered")
        if owner is not None:
            _check_owner(client, name, aliases, owner, uri)
        try:
            with contextlib.redirect_stderr(io.StringIO()):  # MLflow prints "Successfully registered ..."
                version = mlflow.register_model(source, name)
        except MlflowException as exc:
            raise ValueError(f"cannot register {source} as {name!r} in {uri}: {_message(exc)}") from None
        number = int(version.version)
        if owner is not None:
            client.set_model_version_tag(name, str(number), OWNER_TAG, owner)
        for item in aliases:
            try:
                client.set_registered_model_alias(name, item, number)
            except MlflowException as exc:
                raise ValueError(f"cannot set alias {item!r} on {name!r} version {number}: {_message(exc)}") from None
    return Registration(name, number, aliases, run_id, source, uri)


def _check_owner(client, name: str, aliases: tuple[str, ...], owner: str, uri: str) -> None:
    """ValueError when one of `aliases` of `name` points at a version not tagged `OWNER_TAG=owner`."""
    from mlflow.exceptions import MlflowException

    for item in aliases:
        try:
            current = client.get_model_version_by_alias(name, item)
        except MlflowException:  # no such model or alias yet: nothing to protect
            continue
        if (current.tags or {}).get(OWNER_TAG) != owner:
            raise ValueError(
                f"alias {item!r} of {name!r} in {uri} points at version {current.version}, which {owner} did not "
                f"register: it is left as it is (use another name or alias)"
            )


def set_alias(name: str, alias: str, version: int, *, tracking_uri: str | None = None) -> Registration:
    """Points `alias` at an existing version of a registered model (promotion, rollback).

    Args:
        name: the registered model.
        alias: the alias to set (moved if it pointed elsewhere).
        version: the version number.
        tracking_uri: the store; None = MLFLOW_TRACKING_URI or the project's store.

    Returns:
        The `Registration` of that version with `aliases == (alias,)`.

    Raises:
        ValueError: no such model or version, a bad alias.
    """
    import mlflow
    from mlflow.exceptions import MlflowException

    # lazy: scikit-learn via experiments/
    from psyattrs.experiments.store import quiet_mlflow, tracking_store

    name = _check_name(name)
    (alias,) = _aliases(alias)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"version must be an integer >= 1, got {version!r}")
    with tracking_store(tracking_uri) as uri, quiet_mlflow():
        client = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
        try:
            found = client.get_model_version(name, str(version))
            client.set_registered_model_alias(name, alias, version)
        except MlflowException as exc:
            raise ValueError(f"cannot set alias {alias!r} on {name!r} version {version} in {uri}: {_message(exc)}") from None
    return Registration(name, version, (alias,), found.run_id or "", found.source, uri)


def resolve_alias(name: str, alias: str = DEFAULT_ALIAS, *, tracking_uri: str | None = None) -> Registration:
    """The version an alias points at.

    Raises:
        ValueError: no such model or alias.
    """
    import mlflow
    from mlflow.exceptions import MlflowException

    # lazy: scikit-learn via experiments/
    from psyattrs.experiments.store import quiet_mlflow, tracking_store

    with tracking_store(tracking_uri) as uri, quiet_mlflow():
        client = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
        try:
            found = client.get_model_version_by_alias(name, alias)
        except MlflowException as exc:
            raise ValueError(f"no version of {name!r} has alias {alias!r} in {uri}: {_message(exc)}") from None
    return Registration(name, int(found.version), (alias,), found.run_id or "", found.source, uri)


def pinned_uri(model: Any, *, tracking_uri: str | None = None) -> Any:
    """`models:/NAME@ALIAS` resolved to the version the alias points at now (`models:/NAME/VERSION`);
    anything else unchanged. A long job pins its model so that moving the alias mid-way (or
    between an interrupted run and its resumption) cannot mix two models in one output.

    Raises:
        ValueError: no such model or alias.
    """
    if not isinstance(model, str) or not model.startswith("models:/") or "@" not in model:
        return model
    name, _, alias = model[len("models:/"):].partition("@")
    return f"models:/{name}/{resolve_alias(name, alias, tracking_uri=tracking_uri).version}"
