"""``synthfactory sweep``: measure vLLM engine arguments on a sample of a prompt shard and
keep the defaults unless a configuration is measurably faster (docs/adr/0115).

grid.py expands the grid, keys each configuration by a stable hash and names the
GPU-only entries; winner.py backs each entry off before it is measured, prices it and
writes the decision next to the model; halving.py runs successive halving in rounds
that alternate with the defaults; decision.py is the rule that crowns or keeps; trial.py
runs one trial in its own process (the worker's engine and chat path); runner.py
launches and watches those processes; results.py keeps the per-trial records in
``--out`` (so a rerun reuses them); report.py prints the table and draws the PNG;
command.py ties them together.
"""
