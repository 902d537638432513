"""The put-if-absent Delta log store's jar (``java/``), shipped built: data, no code."""
