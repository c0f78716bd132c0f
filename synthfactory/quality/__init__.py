"""The quality gate: a per-row verdict on whether a generated row is worth training on.

``gate.assess`` takes source and output texts and returns, per row, ``usable``,
``reasons`` (from :data:`reasons.REASONS`) and ``clean_text``; ``synthfactory quality``
runs it over a Parquet table (docs/quality.md).
"""
