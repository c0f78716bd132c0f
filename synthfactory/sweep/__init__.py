"""``synthfactory sweep``: grid-search vLLM engine arguments on a sample of a prompt shard.

grid.py expands the grid and keys each configuration by a stable hash; trial.py runs one
configuration in its own process (the worker's engine and chat path); runner.py launches
and watches those processes; results.py keeps the per-configuration records in ``--out``
(so a rerun skips what is done); winner.py picks the best and backs it off; report.py
prints the table and draws the PNG; command.py ties them together.
"""
