"""The data leaves the factory: a dataset card for a run (``synthfactory card``) and an
export of its usable rows as Parquet with the card beside them, optionally pushed to the
Hugging Face Hub (``synthfactory export``; docs/export.md)."""
