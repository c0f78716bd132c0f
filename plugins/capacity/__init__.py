"""Capacity sensors: wait until a whole wave of pods fits the cluster at one moment.

`fit`, `quantities`, `wave` and `report` are pure Python (no Airflow import) so the
benchmark and unit tests stay fast; `sensor` and `trigger` are the Airflow layer.
"""
