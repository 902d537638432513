"""Writers: routing and framing, the append path, the event writer, transactions and large
events.

Pravega's counterpart: ``EventStreamWriterImpl``, ``SegmentSelector``,
``TransactionalEventStreamWriterImpl`` and the large-event writer.

Internal: import from ``pravega_spark``.
"""
