"""Operators that launch ``synthfactory`` engine subcommands.

The runner (operators/runners/, picked from the settings) decides how a step's argv runs:
a ``local`` subprocess, a ``kubernetes`` pod, or under ``kuberay`` pods plus one RayJob
for the rephrase wave; the argv is the same in all. Nothing here imports vllm, torch,
pyspark, ray or grain.
"""
