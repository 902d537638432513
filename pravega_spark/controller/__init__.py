"""The controller: the workflows that change a stream (create, scale, seal, truncate,
delete), the client that writers, readers and services call, its view of a stream's cuts, the
subscribers of consumption-based retention, and watermarks.

Pravega's counterpart: the client's ``Controller``, ``StreamCutHelper``, the controller's
``StreamMetadataTasks`` with its request handlers, and ``PeriodicWatermarking``.

Internal: import from ``pravega_spark``.
"""
