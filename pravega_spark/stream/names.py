"""Name rules for scopes, streams, reader groups and key-value tables (pure Python).

Mirrors Pravega's ``NameUtils.validateUserScopeName`` / ``validateUserStreamName``: user names are
made of ASCII letters, digits, ``.`` and ``-``; ``_`` is reserved for internal names and ``/`` is
the scope separator. Names become path components under the store root, so ``.`` and ``..`` are
refused as well: a name that could escape the root is rejected before any I/O.

Example:
    >>> scoped_name("iot", "sensors")
    'iot/sensors'
    >>> parse_scoped_name("iot/sensors")
    ('iot', 'sensors')
"""

from __future__ import annotations

import re

from pravega_spark.errors import InvalidNameError

__all__ = [
    "MAX_SCOPE_NAME_LENGTH",
    "MAX_STREAM_NAME_LENGTH",
    "parse_scoped_name",
    "scoped_name",
    "validate_key_value_table_name",
    "validate_reader_group_name",
    "validate_scope_name",
    "validate_stream_name",
    "validate_user_name",
]

MAX_SCOPE_NAME_LENGTH = 255
"""Pravega's limit for a user scope name."""

MAX_STREAM_NAME_LENGTH = 250
"""Pravega's ``MAX_GIVEN_NAME_SIZE`` (255 - 5): streams, reader groups and key-value tables."""

_ALLOWED = re.compile(r"[A-Za-z0-9.\-]+")
_RULE = "only ASCII letters, digits, '.' and '-' are allowed (regex [A-Za-z0-9.\\-]+)"
_MAX_REPR = 60


def _show(value: object) -> str:
    """``repr(value)``, shortened for huge strings so error messages stay readable."""
    if isinstance(value, str) and len(value) > _MAX_REPR:
        return f"{value[:_MAX_REPR]!r}... ({len(value)} chars)"
    return repr(value)


def validate_user_name(name: object, kind: str = "stream") -> str:
    """Check a user-given name against Pravega's rules and return it unchanged.

    ``kind`` is ``"scope"`` (at most 255 chars) or any other noun such as ``"stream"``,
    ``"reader group"`` or ``"key-value table"`` (at most 250 chars); it is also used in messages.

    Mirrors Pravega's ``NameUtils.validateUserStreamName`` / ``validateUserScopeName``, plus the
    refusal of ``.`` and ``..`` (path components that could escape the store root).

    Example:
        >>> validate_user_name("sensors-2024.v1", "stream")
        'sensors-2024.v1'

    Raises:
        InvalidNameError: the name is not a str, is empty, too long, contains ``/`` or ``_`` or
            any other character outside ``[A-Za-z0-9.-]``, or is ``.`` / ``..``.
    """
    if not isinstance(name, str):
        raise InvalidNameError(
            f"{kind} name must be a str, got {type(name).__name__} {_show(name)}"
        )
    if not name:
        raise InvalidNameError(f"{kind} name must not be empty, got ''")
    limit = MAX_SCOPE_NAME_LENGTH if kind == "scope" else MAX_STREAM_NAME_LENGTH
    if len(name) > limit:
        raise InvalidNameError(
            f"{kind} name {_show(name)} is {len(name)} chars long, at most {limit} allowed"
        )
    if "/" in name:
        raise InvalidNameError(
            f"{kind} name {_show(name)} must not contain '/' (the scope separator)"
        )
    if "_" in name:
        raise InvalidNameError(
            f"{kind} name {_show(name)} must not contain '_' (reserved for internal names)"
        )
    if name in (".", ".."):
        raise InvalidNameError(
            f"{kind} name {_show(name)} is refused: '.' and '..' could escape the store root"
        )
    if _ALLOWED.fullmatch(name) is None:
        bad = sorted({ch for ch in name if _ALLOWED.fullmatch(ch) is None})
        raise InvalidNameError(f"{kind} name {_show(name)} contains {''.join(bad)!r}: {_RULE}")
    return name


def validate_scope_name(name: object) -> str:
    """Validate a user scope name (at most 255 chars); see :func:`validate_user_name`.

    Example:
        >>> validate_scope_name("iot")
        'iot'
    """
    return validate_user_name(name, "scope")


def validate_stream_name(name: object) -> str:
    """Validate a user stream name (at most 250 chars); see :func:`validate_user_name`.

    Example:
        >>> validate_stream_name("sensors")
        'sensors'
    """
    return validate_user_name(name, "stream")


def validate_reader_group_name(name: object) -> str:
    """Validate a reader group name (Pravega: ``validateReaderGroupName``, stream rules)."""
    return validate_user_name(name, "reader group")


def validate_key_value_table_name(name: object) -> str:
    """Validate a key-value table name (Pravega: ``validateUserKeyValueTableName``, stream rules)."""
    return validate_user_name(name, "key-value table")


def scoped_name(scope: str, stream: str) -> str:
    """Pravega's scoped stream name ``scope/stream``, both parts validated.

    Example:
        >>> scoped_name("iot", "sensors")
        'iot/sensors'
    """
    return f"{validate_scope_name(scope)}/{validate_stream_name(stream)}"


def parse_scoped_name(scoped: object) -> tuple[str, str]:
    """Split ``scope/stream`` into ``(scope, stream)``, both parts validated.

    Mirrors Pravega's ``Stream.of(scopedName)``.

    Example:
        >>> parse_scoped_name("iot/sensors")
        ('iot', 'sensors')

    Raises:
        InvalidNameError: not a str, not exactly one ``/``, or an invalid part.
    """
    if not isinstance(scoped, str):
        raise InvalidNameError(
            f"scoped name must be a str, got {type(scoped).__name__} {_show(scoped)}"
        )
    if scoped.count("/") != 1:
        raise InvalidNameError(
            f"scoped name {_show(scoped)} must have the form 'scope/stream' "
            f"(exactly one '/', found {scoped.count('/')})"
        )
    scope, stream = scoped.split("/")
    return validate_scope_name(scope), validate_stream_name(stream)
