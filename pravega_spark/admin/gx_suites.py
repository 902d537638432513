"""Great Expectations glue for ``validation.py``: one custom metric, one custom expectation, and a
run of one suite per prepared table through GX's Spark datasource in an ephemeral context.

- metric ``pravega.invariant_violations`` (table domain, Spark engine): one aggregation over the
  batch's ``kind`` and ``violates_*`` columns, giving the rows checked by kind and the rows breaking
  each invariant; only for a broken invariant a second query fetches up to 5 example rows. GX
  computes a metric once per batch, however many expectations depend on it.
- expectation ``ExpectStreamInvariant(invariant=...)``: no row of the batch breaks that invariant.

Imported lazily: Great Expectations is an optional dependency (the ``quality`` extra) and takes
seconds to import.
"""

from __future__ import annotations

import logging
import os
from typing import Any, ClassVar

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
# GX logs its own registrations and temporary folders at INFO while importing and running
logging.getLogger("great_expectations").setLevel(logging.WARNING)

import great_expectations as gx  # noqa: E402
from great_expectations.core.metric_domain_types import MetricDomainTypes  # noqa: E402
from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: E402
from great_expectations.execution_engine import SparkDFExecutionEngine  # noqa: E402
from great_expectations.expectations.expectation import BatchExpectation  # noqa: E402
from great_expectations.expectations.metrics.metric_provider import metric_value  # noqa: E402
from great_expectations.expectations.metrics.table_metric_provider import TableMetricProvider  # noqa: E402
from pyspark.sql import DataFrame  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from ..store.schema import VIOLATION_PREFIX  # noqa: E402

log = logging.getLogger("pravega_spark")

METRIC = "pravega.invariant_violations"
MAX_EXAMPLES = 5


def _plain(value: Any) -> Any:
    """A JSON-friendly value for Data Docs."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def violation_counts(df: DataFrame) -> dict:
    """``{"rows": {kind: n}, "violations": {invariant: n}, "examples": {invariant: [row, ...]}}``
    from a prepared table's ``kind`` and ``violates_<invariant>`` columns: one aggregation, plus
    one small query per broken invariant for its examples."""
    flags = [c for c in df.columns if c.startswith(VIOLATION_PREFIX)]
    rows: dict[str, int] = {}
    broken: dict[str, int] = {}
    if df.isLocal():  # a small batch held by the driver: count there, no Spark job
        counted = {}
        for r in df.select("kind", *flags).collect():
            n = counted.setdefault(r[0], [0] * (len(flags) + 1))
            n[0] += 1
            for i, v in enumerate(r[1:], 1):
                n[i] += bool(v)
        totals = [(kind, *n) for kind, n in counted.items()]
    else:
        totals = df.groupBy("kind").agg(F.count(F.lit(1)), *[F.count_if(F.col(c)) for c in flags]).collect()
    for r in totals:
        rows[r[0]] = r[1]
        for flag, n in zip(flags, r[2:], strict=True):
            if n:
                name = flag[len(VIOLATION_PREFIX):]
                broken[name] = broken.get(name, 0) + n
    examples = {}
    for name in broken:
        found = df.where(F.col(VIOLATION_PREFIX + name)).drop(*flags).limit(MAX_EXAMPLES).collect()
        examples[name] = [{k: _plain(v) for k, v in r.asDict().items() if v is not None} for r in found]
    return {"rows": rows, "violations": broken, "examples": examples}


class InvariantViolations(TableMetricProvider):
    """Rows checked and rows breaking each invariant, from a prepared table's ``violations``."""

    metric_name = METRIC

    @metric_value(engine=SparkDFExecutionEngine)
    def _spark(cls, execution_engine, metric_domain_kwargs, metric_value_kwargs, metrics, runtime_configuration):
        df, _, _ = execution_engine.get_compute_domain(metric_domain_kwargs, domain_type=MetricDomainTypes.TABLE)
        return violation_counts(df)


class ExpectStreamInvariant(BatchExpectation):
    """Expect no row of a prepared stream table to break the named invariant
    (see ``pravega_spark.admin.validation.INVARIANTS``)."""

    invariant: str
    metric_dependencies: ClassVar[tuple[str, ...]] = (METRIC,)
    domain_keys: ClassVar[tuple[str, ...]] = ("row_condition", "condition_parser")
    success_keys = ("invariant",)
    args_keys = ("invariant",)

    def _validate(self, metrics: dict, runtime_configuration: dict | None = None, execution_engine=None):
        found = metrics[METRIC]
        broken = found["violations"].get(self.invariant, 0)
        return {"success": broken == 0,
                "result": {"observed_value": broken, "element_count": sum(found["rows"].values()),
                           "unexpected_count": broken, "rows_by_kind": found["rows"],
                           "partial_unexpected_list": found["examples"].get(self.invariant, [])}}


class GxRun:
    """One ephemeral GX context validating the prepared tables of one stream."""

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self.context = gx.get_context(mode="ephemeral")
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        self.source = self.context.data_sources.add_spark("pravega_spark", persist=False)

    def validate(self, table: str, df: DataFrame, invariants) -> list[tuple[str, bool, dict]]:
        """Run the suite of ``invariants`` on ``df``; returns (invariant, success, details)."""
        batch = self.source.add_dataframe_asset(table).add_batch_definition_whole_dataframe("whole")
        suite = self.context.suites.add(gx.ExpectationSuite(
            name=table,
            expectations=[ExpectStreamInvariant(invariant=i.name, description=i.description) for i in invariants]))
        run = self.context.validation_definitions.add(
            gx.ValidationDefinition(name=table, data=batch, suite=suite))
        outcome = run.run(batch_parameters={"dataframe": df}, result_format="COMPLETE")
        out = []
        for r in outcome.results:
            name = r.expectation_config.kwargs["invariant"]
            if r.exception_info and r.exception_info.get("raised_exception"):
                raise RuntimeError(f"expectation {name} on {table} raised: {r.exception_info.get('exception_message')}")
            out.append((name, bool(r.success), dict(r.result)))
        return out

    def build_data_docs(self, path: str) -> str:
        """Write the Data Docs of every validation run so far into ``path``; returns index.html."""
        site = f"site_{len(self.context.get_site_names())}"
        self.context.add_data_docs_site(site, {
            "class_name": "SiteBuilder",
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": os.path.abspath(path)},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        })
        urls = self.context.build_data_docs(site_names=[site])
        return urls[site].removeprefix("file://")

