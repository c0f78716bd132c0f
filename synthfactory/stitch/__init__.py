"""Prompt stitching: versioned templates joined onto seed documents by a Spark job,
cut into shards by a token budget."""
