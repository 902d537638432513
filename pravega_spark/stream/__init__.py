"""The stream model, pure Python: names, configuration, segments and epochs, stream cuts and the
controller's algorithms over them, scale planning, truncation records and retention rules.

Pravega's counterpart: the value classes of ``io.pravega.client.stream`` and the controller's
records (``StreamConfiguration``, ``Segment``, ``StreamCut``, ``StreamTruncationRecord``,
``EpochTransitionRecord``, ``RetentionSet``). Nothing here reads or writes a table.

Internal: import from ``pravega_spark``.
"""
