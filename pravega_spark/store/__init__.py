"""The store: where each table lives, the schemas of every table, and the reads and guarded
commits on them (the metadata tables and the segments' events), plus compaction.

Pravega's counterpart: the controller's ``StreamMetadataStore`` and the segment store (its reads
by offset range, and its storage writer's compaction).

Internal: import from ``pravega_spark``.
"""
