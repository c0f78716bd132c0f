"""Rephrasing prompt shards exactly once: a checkpointed vLLM worker."""
