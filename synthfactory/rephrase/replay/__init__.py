"""Replay by request (docs/adr/0150): an attempt whose request key matches in full an
attempt committed before, in this run or another day's of the same pipeline, is not sent
to the engine again; its output is read back from where it was committed.

- ``key.py``: what the key covers, and the model's identity.
- ``index.py``: where the keys live (Parquet under ``{root}/replay_index/``), how they
  are looked up without reading the whole index, compacted and dropped.
- ``origin.py``: an entry's origin found and checked against its commit before use.
- ``replayer.py``: what the worker asks: this row's attempt, replayed or not.
"""
