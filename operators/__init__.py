"""Operators that launch ``synthfactory`` engine subcommands.

The runner setting decides how a step's argv runs (``local`` subprocess or
``kubernetes`` pod); the argv is the same in both. Nothing here imports vllm, torch,
pyspark, ray or grain.
"""
