"""Package layout that pyproject.toml cannot state: the Airflow layer's top-level folders
(operators/, plugins/) install as ``synthfactory_airflow.operators`` and
``synthfactory_airflow.plugins``, names no other distribution uses (docs/adr/0110).

Packages are found in what is on disk, so each image installs only what it copied: the
worker image has synthfactory/ alone, the Airflow image the contract module and the
Airflow layer.
"""

from setuptools import find_packages, setup

LAYER = "synthfactory_airflow"
airflow_layer = {f"{LAYER}.{package}": package.replace(".", "/")
                 for package in find_packages(include=["operators", "operators.*",
                                                       "plugins", "plugins.*"])}

setup(
    packages=find_packages(include=["synthfactory", "synthfactory.*"]) + sorted(airflow_layer),
    package_dir=airflow_layer,
    package_data={"synthfactory": ["templates/*.json", "quality/judge/*.json"],
                  f"{LAYER}.plugins.run_report": ["templates/*"]},
)
