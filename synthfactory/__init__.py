"""synthfactory engine: plain Python that runs in pods, Spark and on a laptop.

Never imports Airflow. Every heavy step is a subcommand of the ``synthfactory``
console script (see :mod:`synthfactory.cli`).
"""

__version__ = "0.1.0"
