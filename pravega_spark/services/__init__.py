"""The controller's periodic services: retention (time, size and consumption-based) and
auto-scaling, with the rate rules auto-scaling applies.

Pravega's counterpart: the controller's ``bucket`` services (``StreamCutBucketService``,
``AutoScaleTask``) and the segment store's rate reporting.

Internal: import from ``pravega_spark``.
"""
