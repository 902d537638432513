"""Administration: the ``StreamManager`` facade, reader-group administration, maintenance,
validation and the operator's pictures.

Pravega's counterpart: ``io.pravega.client.admin`` (``StreamManager``, ``ReaderGroupManager``,
``KeyValueTableManager``) and the operator tools.

Internal: import from ``pravega_spark``.
"""
