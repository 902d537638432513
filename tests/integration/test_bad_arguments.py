"""Bad arguments across the public API: a wrong type, a value out of range or a bad name gets a
``PravegaSparkError`` subclass (a ``ValueError`` where the value is wrong) whose one-line message
names the argument, before anything is written: every table of the store keeps its version."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest

import pravega_spark as ps

S, T = "iot", "sensors"


def log_versions(root: str) -> dict[str, list[str]]:
    """Every table's commit files under ``root``: what a change to any table would change."""
    out = {}
    for folder, _, files in os.walk(root):
        if folder.endswith("_delta_log"):
            out[folder] = sorted(f for f in files if f.endswith(".json"))
    return out


# (what is called, the error class, a word the message must hold: the argument's name)
CASES = [
    ("vacuum retention negative", lambda m, w: m.vacuum(S, T, retention=timedelta(hours=-1)),
     ps.InvalidConfigError, "retention"),
    ("vacuum retention not a timedelta", lambda m, w: m.vacuum(S, T, retention=3600), ps.InvalidConfigError, "retention"),
    ("create_stream config not a StreamConfiguration", lambda m, w: m.create_stream(S, "other", "fixed(2)"),
     ps.InvalidConfigError, "config"),
    ("update_stream without a config", lambda m, w: m.update_stream(S, T, None), ps.InvalidConfigError, "config"),
    ("scale_stream sealed_segments a string", lambda m, w: m.scale_stream(S, T, "0", [(0.0, 0.5)]),
     ps.InvalidScaleError, "sealed_segments"),
    ("scale_stream ranges not covering", lambda m, w: m.scale_stream(S, T, [0], [(0.0, 0.4)]), ps.InvalidScaleError,
     "range"),
    ("truncate_stream with a string", lambda m, w: m.truncate_stream(S, T, "tail"), ps.InvalidStreamCutError,
     "stream_cut"),
    ("read_events start a number", lambda m, w: m.read_events(S, T, start=5), ps.InvalidStreamCutError, "start"),
    ("run_retention now a string", lambda m, w: m.run_retention(S, T, now="yesterday"), ps.InvalidConfigError, "now"),
    ("run_retention bucket out of range", lambda m, w: m.run_retention(S, T, bucket=2, buckets=2),
     ps.InvalidConfigError, "bucket"),
    ("run_autoscale cooldown negative", lambda m, w: m.run_autoscale(S, T, cooldown=timedelta(seconds=-1)),
     ps.InvalidConfigError, "cooldown"),
    ("compact target_file_size zero", lambda m, w: m.compact(S, T, target_file_size=0), ps.InvalidConfigError,
     "target_file_size"),
    ("compact an unknown segment", lambda m, w: m.compact(S, T, segment_ids=[99]), ps.SegmentNotFoundError, "99"),
    ("create_reader_group config a dict", lambda m, w: m.create_reader_group(S, "g", {f"{S}/{T}": "earliest"}),
     ps.InvalidConfigError, "config"),
    ("create_key_value_table without a config", lambda m, w: m.create_key_value_table(S, "t", None),
     ps.InvalidConfigError, "config"),
    ("list_streams scope a number", lambda m, w: m.list_streams(123), ps.InvalidNameError, "scope"),
    ("stream_info stream None", lambda m, w: m.stream_info(S, None), ps.InvalidNameError, "stream"),
    ("create_event_writer writer_id a number", lambda m, w: m.create_event_writer(S, T, writer_id=5),
     ps.InvalidNameError, "writer_id"),
    ("write_events of a list", lambda m, w: w.write_events([("k", "v")]), ps.InvalidEventError, "DataFrame"),
    ("write_event of a number", lambda m, w: w.write_event(5, routing_key="k"), ps.InvalidEventError, "event"),
    ("stream_progress timeout negative", lambda m, w: m.stream_progress(None, timeout_seconds=-1),
     ps.InvalidConfigError, "timeout_seconds"),
    ("read_stream max_bytes_per_trigger not a size", lambda m, w: m.read_stream(S, T, max_bytes_per_trigger="lots"),
     ps.InvalidConfigError, "max_bytes_per_trigger"),
    ("run_retention frequency negative", lambda m, w: m.run_retention(S, T, frequency=timedelta(minutes=-5)),
     ps.InvalidConfigError, "frequency"),
]


@pytest.mark.both_backends(slow=("sql",))
def test_bad_arguments_get_one_clear_error_naming_the_argument_and_change_nothing(spark, root, manager, stream2,
                                                                                 delta_backend):
    writer = manager.create_event_writer(S, T, writer_id="w")
    writer.write_events(spark.createDataFrame([("k", "v")], "routing_key string, event string"))
    before = log_versions(root)
    wrong = []
    for name, call, error, word in CASES:
        try:
            call(manager, writer)
            wrong.append(f"{name}: no error")
        except error as exc:
            message = str(exc)
            if word not in message or "\n" in message.strip() or not isinstance(exc, ps.PravegaSparkError):
                wrong.append(f"{name}: {type(exc).__name__}: {message[:300]}")
        except Exception as exc:  # noqa: BLE001 - the wrong error: reported with the others
            wrong.append(f"{name}: {type(exc).__name__} instead of {error.__name__}: {str(exc)[:300]}")
    assert wrong == [], "\n".join(wrong)
    assert log_versions(root) == before
