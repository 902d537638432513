# Databricks notebook source
# MAGIC %md
# MAGIC # pravega-spark quick start
# MAGIC A stream end to end: create, write, scale, read between cuts, a reader group with a checkpoint,
# MAGIC retention, a transaction, the two pictures and the stream's invariants. On Databricks it uses
# MAGIC the notebook's `spark`; run as a script (`python notebooks/quickstart.py [ROOT]`) it starts a local
# MAGIC session. Set `ROOT` to a `dbfs:/`, `s3a://` or `abfss://` folder of your own.

# COMMAND ----------

import os
import sys
import tempfile
from datetime import timedelta

import pravega_spark as ps

spark = ps.spark_session()  # the active session when there is one
# the store: PRAVEGA_QUICKSTART_ROOT, the script's argument, else a new local folder
given = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") and sys.argv[0].endswith("quickstart.py") else None
ROOT = os.environ.get("PRAVEGA_QUICKSTART_ROOT") or given or tempfile.mkdtemp(prefix="pravega-quickstart-")
manager = ps.StreamManager(spark, ROOT)
manager.create_scope("quickstart")
manager.create_stream("quickstart", "sensors", ps.StreamConfiguration(
    scaling_policy=ps.ScalingPolicy.fixed(2),
    retention_policy=ps.RetentionPolicy.by_time(timedelta(days=1), timedelta(days=7))))
print(manager)

# COMMAND ----------

# MAGIC %md Write events (routed by key, ordered per key), then split a segment.

# COMMAND ----------

writer = manager.create_event_writer("quickstart", "sensors", writer_id="notebook")
readings = spark.createDataFrame([(f"dev-{i % 5}", f'{{"seq": {i}}}') for i in range(50)],
                                 "device_id string, payload string")
print(writer.write_events(readings, routing_key="device_id", event="payload"))
manager.scale_stream("quickstart", "sensors", sealed_segments=[0], new_key_ranges=[(0.0, 0.25), (0.25, 0.5)])
cut = manager.tail_stream_cut("quickstart", "sensors")
writer.write_events(spark.createDataFrame([(f"dev-{i % 5}", f'{{"seq": {50 + i}}}') for i in range(20)],
                                          "device_id string, payload string"), routing_key="device_id", event="payload")

# COMMAND ----------

# MAGIC %md Read between cuts: only what came after `cut`.

# COMMAND ----------

after = manager.read_events("quickstart", "sensors", start=cut)
print("after the cut:", after.count(), "in all:", manager.read_events("quickstart", "sensors").count())
manager.epochs("quickstart", "sensors").show(truncate=False)

# COMMAND ----------

# MAGIC %md A reader group with a checkpoint.

# COMMAND ----------

manager.create_reader_group("quickstart", "dashboard", ps.ReaderGroupConfig({"quickstart/sensors": "earliest"}))
group = manager.reader_group("quickstart", "dashboard")
reader = group.create_reader("reader-1")
print("first batch:", reader.read_next().events.count(), "events")
group.initiate_checkpoint("first")
print("checkpoint batch:", reader.read_next().checkpoint)
print("checkpoint cuts:", group.get_checkpoint("first"))
group.plot()
reader.close()

# COMMAND ----------

# MAGIC %md Retention: record the tail in the retention set (truncation waits for the policy's minimum).

# COMMAND ----------

for outcome in manager.run_retention("quickstart", "sensors"):
    print(outcome)
manager.retention_set("quickstart", "sensors").show(truncate=False)

# COMMAND ----------

# MAGIC %md A transaction: its events stay invisible until the commit appends them all at once.

# COMMAND ----------

txn_writer = manager.create_transactional_writer("quickstart", "sensors", writer_id="batch-job")
txn = txn_writer.begin_txn()
txn.write_event(b'{"seq": "txn-1"}', routing_key="dev-1")
txn.write_event(b'{"seq": "txn-2"}', routing_key="dev-2")
before = manager.read_events("quickstart", "sensors").count()
txn.commit()
print("events before the commit:", before, "after:", manager.read_events("quickstart", "sensors").count())

# COMMAND ----------

# MAGIC %md The pictures: the key space over time, and retention.

# COMMAND ----------

manager.plot_epochs("quickstart", "sensors")

# COMMAND ----------

manager.plot_retention("quickstart", "sensors")

# COMMAND ----------

# MAGIC %md The stream's invariants, checked with Great Expectations.

# COMMAND ----------

validation = manager.validate_stream("quickstart", "sensors")
print(validation)
assert validation.success
print("QUICKSTART OK")
