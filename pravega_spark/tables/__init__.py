"""Key-value tables: the table, its entries and versions, and key routing.

Pravega's counterpart: ``io.pravega.client.tables`` (``KeyValueTable``, ``TableEntry``,
``Version``) and ``KeyValueTableRouter``.

Internal: import from ``pravega_spark``.
"""
