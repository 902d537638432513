"""Tests for pravega_spark.stream.names (Pravega's NameUtils rules plus path-escape refusal)."""

from __future__ import annotations

import pytest

from pravega_spark.errors import InvalidNameError, PravegaSparkError
from pravega_spark.stream.names import (
    MAX_SCOPE_NAME_LENGTH,
    MAX_STREAM_NAME_LENGTH,
    parse_scoped_name,
    scoped_name,
    validate_key_value_table_name,
    validate_reader_group_name,
    validate_scope_name,
    validate_stream_name,
    validate_user_name,
)

VALIDATORS = [
    validate_scope_name,
    validate_stream_name,
    validate_reader_group_name,
    validate_key_value_table_name,
]


@pytest.mark.parametrize("validate", VALIDATORS)
@pytest.mark.parametrize(
    "name", ["iot", "sensors", "a", "A-b.C-9", "0", "-", "...", ".hidden", "x..y", "2024.01-v2"]
)
def test_valid_names_are_returned_unchanged(validate, name):
    assert validate(name) == name


def test_limits_match_pravega():
    assert MAX_SCOPE_NAME_LENGTH == 255
    assert MAX_STREAM_NAME_LENGTH == 250


def test_error_is_value_error_and_root():
    with pytest.raises(InvalidNameError) as info:
        validate_stream_name("a/b")
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, PravegaSparkError)


@pytest.mark.parametrize("validate", VALIDATORS)
@pytest.mark.parametrize("name", ["a/b", "/x", "x/", "/", "../x", "x/../y"])
def test_slash_refused(validate, name):
    with pytest.raises(InvalidNameError, match="must not contain '/'"):
        validate(name)


@pytest.mark.parametrize("validate", VALIDATORS)
@pytest.mark.parametrize("name", ["_internal", "a_b", "x_", "_"])
def test_underscore_refused(validate, name):
    with pytest.raises(InvalidNameError, match="must not contain '_'"):
        validate(name)


@pytest.mark.parametrize("validate", VALIDATORS)
@pytest.mark.parametrize("name", [".", ".."])
def test_dot_and_dotdot_refused(validate, name):
    with pytest.raises(InvalidNameError, match="could escape the store root"):
        validate(name)


def test_stream_length_limit_is_250():
    assert validate_stream_name("s" * 250) == "s" * 250
    with pytest.raises(InvalidNameError) as info:
        validate_stream_name("s" * 251)
    message = str(info.value)
    assert "stream name" in message
    assert "251 chars long" in message
    assert "at most 250" in message


def test_scope_length_limit_is_255():
    assert validate_scope_name("s" * 255) == "s" * 255
    with pytest.raises(InvalidNameError, match="256 chars long, at most 255 allowed"):
        validate_scope_name("s" * 256)


def test_reader_group_and_kvt_follow_stream_limit():
    for validate in (validate_reader_group_name, validate_key_value_table_name):
        assert validate("r" * 250)
        with pytest.raises(InvalidNameError, match="at most 250"):
            validate("r" * 251)


@pytest.mark.parametrize("validate", VALIDATORS)
@pytest.mark.parametrize(
    "name, bad",
    [
        ("café", "é"),
        ("流", "流"),
        ("ｓｔｒｅａｍ", "ａｅｍｒｓｔ"),
        ("a b", " "),
        (" a", " "),
        ("tab\tx", "\t"),
        ("line\n", "\n"),
        ("a:b", ":"),
        ("a*b", "*"),
        ("a\\b", "\\"),
        ("a\x00b", "\x00"),
    ],
)
def test_characters_outside_ascii_alnum_dot_dash_refused(validate, name, bad):
    with pytest.raises(InvalidNameError) as info:
        validate(name)
    message = str(info.value)
    assert repr(bad) in message
    assert "[A-Za-z0-9.\\-]+" in message


@pytest.mark.parametrize("validate", VALIDATORS)
def test_empty_refused(validate):
    with pytest.raises(InvalidNameError, match="must not be empty"):
        validate("")


@pytest.mark.parametrize("validate", VALIDATORS)
@pytest.mark.parametrize("value", [None, 7, b"bytes", ["a"], 1.5])
def test_non_str_refused(validate, value):
    with pytest.raises(InvalidNameError) as info:
        validate(value)
    message = str(info.value)
    assert "must be a str" in message
    assert type(value).__name__ in message
    assert repr(value) in message


def test_message_names_kind_value_and_rule():
    with pytest.raises(InvalidNameError) as info:
        validate_user_name("my_stream", "reader group")
    message = str(info.value)
    assert message.startswith("reader group name 'my_stream'")
    assert "reserved for internal names" in message

    with pytest.raises(InvalidNameError, match=r"^scope name '\.\.'"):
        validate_scope_name("..")
    with pytest.raises(InvalidNameError, match="^key-value table name"):
        validate_key_value_table_name("a/b")


def test_huge_value_is_truncated_in_message():
    with pytest.raises(InvalidNameError) as info:
        validate_stream_name("x" * 10_000)
    message = str(info.value)
    assert len(message) < 300
    assert "(10000 chars)" in message


def test_scoped_name_round_trip():
    assert scoped_name("iot", "sensors") == "iot/sensors"
    assert parse_scoped_name("iot/sensors") == ("iot", "sensors")
    assert parse_scoped_name(scoped_name("a.b", "c-d")) == ("a.b", "c-d")


def test_scoped_name_validates_both_parts():
    with pytest.raises(InvalidNameError, match="^scope name"):
        scoped_name("bad_scope", "sensors")
    with pytest.raises(InvalidNameError, match="^stream name"):
        scoped_name("iot", "..")
    with pytest.raises(InvalidNameError, match="^stream name"):
        scoped_name("iot", "a/b")


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("iot", "found 0"),
        ("iot/a/b", "found 2"),
        ("../etc/passwd", "found 2"),
        ("iot/", "stream name must not be empty"),
        ("/sensors", "scope name must not be empty"),
        ("../x", "scope name '..'"),
        ("iot/..", "stream name '..'"),
        ("iot/s_1", "stream name 's_1'"),
    ],
)
def test_parse_scoped_name_refuses(text, fragment):
    with pytest.raises(InvalidNameError) as info:
        parse_scoped_name(text)
    assert fragment in str(info.value)


def test_parse_scoped_name_refuses_non_str():
    with pytest.raises(InvalidNameError, match="scoped name must be a str, got NoneType"):
        parse_scoped_name(None)


def test_scope_limit_in_scoped_name():
    scope, stream = "s" * 255, "t" * 250
    assert parse_scoped_name(f"{scope}/{stream}") == (scope, stream)
    with pytest.raises(InvalidNameError, match="at most 250"):
        parse_scoped_name(f"{scope}/{stream}t")
