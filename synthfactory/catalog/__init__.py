"""Catalog registration: committed rephrase shards become rows of an Apache Iceberg table.

``register`` (command.py) reads and checks a run (synthfactory/run_reader.py, which join
reads too), derives its lineage and accounting (lineage.py) and writes both tables
through pyiceberg (iceberg_table.py); ``catalog list|show`` (browse.py) prints what is
registered. config.py decides which catalog a name means. See docs/catalog.md.
"""
