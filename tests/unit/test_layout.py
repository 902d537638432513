"""The package's shape: its public names, its subpackages, and the Delta seam's two complete
implementations (issue #44)."""

import ast
import pathlib

import pravega_spark
from pravega_spark import _delta
from pravega_spark._delta.backend import DeltaBackend
from pravega_spark._delta.sql import SqlTransaction
from pravega_spark._delta.transaction import DeltaTransaction
from pravega_spark._delta.transaction_protocol import VERBS, TableTransaction

PACKAGE = pathlib.Path(pravega_spark.__file__).parent

# the names of the public API: the 88 of before the layout change, StoreFormatError (#45),
# StaleReadError (#67: a Connect read whose cached stream row went stale), and upgrade_store with
# its UpgradeReport (#68: a format-2 store moved to format 3 in place)
PUBLIC = [
    "AutoscaleOutcome", "BadKeyVersionError", "ConditionalTableUpdateError", "EventPointer", "EventStreamReader",
    "EventStreamWriter", "EventTooLargeError", "ExpectationResult", "GenerationMismatchError", "IllegalStateError",
    "Insert", "InvalidBatchError", "InvalidConfigError", "InvalidEventError", "InvalidKeyError", "InvalidNameError",
    "InvalidScaleError", "InvalidStreamCutError", "InvalidWriterMarkError", "KeyValueTable",
    "KeyValueTableConfiguration", "KeyValueTableNotFoundError", "LargeEventFailedError", "LargeEventReader",
    "LargeEventWriter", "MAX_EVENT_SIZE", "MAX_LARGE_EVENT_SIZE", "MaxNumberOfCheckpointsExceededError",
    "NoSuchEventError", "NoSuchKeyError", "PingFailedError", "PravegaSparkError", "Put", "ReadBatch", "ReaderGroup",
    "ReaderGroupConfig", "ReaderGroupNotFoundError", "ReaderGroupSink", "ReaderNotInReaderGroupError", "Remove",
    "RetentionPolicy", "RetentionType", "RetriesExhaustedError", "ScaleConflictError", "ScalePreconditionError",
    "ScaleType", "ScalingPolicy", "ScopeNotEmptyError", "ScopeNotFoundError", "SegmentNotFoundError",
    "SegmentRecord", "SkippedEventsError", "StaleReadError", "StorageAccessError", "StoreFormatError", "StreamConfiguration", "StreamCut",
    "StreamCutBehindError", "StreamDataRetention", "StreamInfo", "StreamManager", "StreamNotFoundError",
    "StreamNotSealedError", "StreamProgress", "StreamSealedError", "StreamValidation", "SubscriberNotFoundError",
    "TableEntry", "TableEntryTooLargeError", "TableLocationError", "TimeWindow", "Transaction",
    "TransactionalEventStreamWriter", "TransientCleanup", "TruncatedDataError", "TruncationRecord",
    "TxnFailedError", "TxnNotFoundError", "TxnStatus", "UnsafeLogStoreError", "UnsupportedOperationError",
    "UpgradeReport", "upgrade_store",
    "Version", "Watermark", "WorkflowPendingError", "WriteResult", "WriterMark", "foreach_batch",
    "idempotent_delta_sink", "key_position", "spark_session",
]


def test_the_public_names_are_pinned():
    assert sorted(pravega_spark.__all__) == sorted(PUBLIC)
    assert len(PUBLIC) == 92
    assert all(hasattr(pravega_spark, name) for name in PUBLIC)


def test_subpackage_faces_hold_only_a_docstring_and_the_top_level_stays_small():
    modules = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(modules) <= 5, modules  # beside __init__.py: at most 6 in all
    for face in PACKAGE.glob("*/__init__.py"):
        if face.parent.name == "_delta":
            continue
        body = ast.parse(face.read_text()).body
        assert len(body) == 1 and isinstance(body[0].value, ast.Constant), face
        assert "import from ``pravega_spark``" in body[0].value.value, face


def test_no_module_outside_the_seam_asks_which_backend_it_has():
    for path in PACKAGE.rglob("*.py"):
        if "_delta" in path.parts:
            continue
        text = path.read_text()
        assert "is_connect" not in text and "backend.connect" not in text, path


def _public_methods(cls) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")
            and (callable(getattr(cls, n)) or isinstance(getattr(cls, n), property))}


def test_both_transactions_implement_every_verb_and_nothing_falls_through():
    declared = {n for n, v in vars(TableTransaction).items()
                if not n.startswith("_") and (callable(v) or isinstance(v, property))}
    assert set(VERBS) == declared
    for cls in (DeltaTransaction, SqlTransaction):
        assert set(VERBS) <= _public_methods(cls), (cls, set(VERBS) - _public_methods(cls))
        assert "__getattr__" not in vars(cls), cls


def test_both_backends_implement_the_whole_protocol_and_neither_inherits_the_other():
    declared = {n for n in vars(DeltaBackend) if not n.startswith("_") and callable(vars(DeltaBackend)[n])}
    assert {"transaction", "truncate", "remove_tables", "delete_partitions", "merge_marked"} <= declared
    for cls in (_delta.ClassicBackend, _delta.SqlBackend):
        assert declared <= _public_methods(cls), (cls, declared - _public_methods(cls))
        assert isinstance(cls.places_files, bool) and isinstance(cls.reads_log_changes, bool)
    assert not issubclass(_delta.SqlBackend, _delta.ClassicBackend)
    assert not issubclass(_delta.ClassicBackend, _delta.SqlBackend)


def test_no_module_is_over_700_lines_but_the_one_allowed():
    allowed = {"stream/stream_cut.py"}
    over = {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    assert {p: n for p, n in over.items() if n > 700 and p not in allowed} == {}
