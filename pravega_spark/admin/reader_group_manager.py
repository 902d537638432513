"""Reader-group administration (Pravega's ``ReaderGroupManager``): create, delete and list
the groups of a scope (``readers.reader_group.open_reader_group`` opens one). A group is one row of the store's ``reader_groups`` table; see
``reader_group`` for what its readers do with it."""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..controller.client import Controller
from ..errors import InvalidConfigError, ScopeNotFoundError
from ..readers.reader_group import group_row, initial_state, subscribe, unsubscribe
from ..readers.reader_group_config import ReaderGroupConfig
from ..store.clock import utc_now
from ..stream.names import validate_reader_group_name, validate_scope_name

log = logging.getLogger("pravega_spark")


def create_reader_group(controller: Controller, scope: str, group: str, config: ReaderGroupConfig) -> bool:
    """``StreamManager.create_reader_group``. Commits: (1) the group's row with its streams' start
    cuts as unassigned segments; (2) its subscriptions, when its retention type is not NONE. A
    crash between the two is made good by the group's first publication, which subscribes it
    again (idempotent)."""
    scope, group = validate_scope_name(scope), validate_reader_group_name(group)
    if not isinstance(config, ReaderGroupConfig):
        raise InvalidConfigError(f"config must be a ReaderGroupConfig, got {type(config).__name__}")
    store = controller.store
    if not store.scope_exists(scope):
        raise ScopeNotFoundError(f"scope {scope} does not exist")
    if store.reader_group_row(scope, group) is not None:
        return False
    state = initial_state(controller, config)  # checks that every stream exists
    row = group_row(scope, group, config, state, 0, utc_now())
    created = store.update_reader_group(scope, group, lambda found: row if found is None else None,
                                        f"create reader group {scope}/{group}")
    if created:
        log.info("created reader group %s/%s reading %s", scope, group, config.scoped_streams)
        subscribe(controller, scope, group, config, 0)
    return created


def delete_reader_group(controller: Controller, scope: str, group: str) -> bool:
    """``StreamManager.delete_reader_group``: its subscriptions first, then its row (a crash in
    between leaves the group, and a retry finishes). False if it did not exist."""
    scope, group = validate_scope_name(scope), validate_reader_group_name(group)
    store = controller.store
    row = store.reader_group_row(scope, group)
    if row is None:
        return False
    unsubscribe(controller, scope, group, ReaderGroupConfig.from_json(row["configuration"]), int(row["generation"]))
    return store.update_reader_group(scope, group, lambda found: {} if found is not None else None,
                                     f"delete reader group {scope}/{group}")


def list_reader_groups(controller: Controller, scope: str) -> DataFrame:
    """The scope's reader groups: ``scope, reader_group, configuration, generation,
    creation_time, update_time``."""
    scope = validate_scope_name(scope)
    return (controller.store.reader_groups().where(F.col("scope") == scope)
            .select("scope", "reader_group", "configuration", "generation", "creation_time", "update_time"))
