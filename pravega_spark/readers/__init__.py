"""Readers: reader groups and their readers, their shared state and sink, batch reads between
cuts, Structured Streaming, large-event assembly and the ``foreachBatch`` sinks.

Pravega's counterpart: ``ReaderGroupImpl``, ``EventStreamReaderImpl``, ``ReaderGroupState`` and
its manager, and ``BatchClientImpl``.

Internal: import from ``pravega_spark``.
"""
