# The Airflow image: scheduler, API server, triggerer, DAG processor and workers that
# only *launch* steps (KubernetesPodOperator). No vLLM, torch, Spark or Ray here.
FROM apache/airflow:3.3.2-python3.11

# The image's airflow user by number, so that the kubelet can verify runAsNonRoot
# (the official Helm chart runs it as uid 50000, gid 0).
USER 50000
RUN pip install --no-cache-dir \
      "apache-airflow[postgres]==3.3.2" \
      "apache-airflow-providers-cncf-kubernetes==10.25.0" \
      "apache-airflow-providers-amazon==9.39.0" \
      "apache-airflow-providers-standard==1.21.0" \
      "apache-airflow-providers-openlineage==2.20.3" \
      "prometheus_client==0.26.0"

# The Airflow layer installs as a package (synthfactory_airflow.operators, .plugins) with
# the engine's stdlib-only contract module and the report's figures (the Run report
# computes them for a run without report.json; docs/adr/0146), and nothing else of the
# engine's code (one data file: the shipped routing table): one copy, imported the same way as in the
# development environment. The run report plugin registers through the package's entry
# point, so the plugins folder stays empty (docs/adr/0110).
COPY --chown=50000:0 pyproject.toml setup.py README.md /opt/synthfactory/
COPY --chown=50000:0 synthfactory/__init__.py /opt/synthfactory/synthfactory/__init__.py
COPY --chown=50000:0 synthfactory/contract/ /opt/synthfactory/synthfactory/contract/
COPY --chown=50000:0 synthfactory/report_figures/ /opt/synthfactory/synthfactory/report_figures/
# the shipped routing table, as data: the trigger form's `routing` Param lists its routes
# (synthfactory/contract/routing_form.py reads it beside the contract; ADR 0139)
COPY --chown=50000:0 synthfactory/templates/routing.json /opt/synthfactory/synthfactory/templates/routing.json
COPY --chown=50000:0 operators/ /opt/synthfactory/operators/
COPY --chown=50000:0 plugins/ /opt/synthfactory/plugins/
RUN pip install --no-cache-dir --no-deps /opt/synthfactory
COPY --chown=50000:0 dags/ /opt/airflow/dags/
# the Airflow pools, imported by the Helm values' init container (deploy/airflow-values.yaml)
COPY --chown=50000:0 deploy/pools.json /opt/synthfactory/deploy/pools.json

ENV SYNTHFACTORY_RUNNER=kubernetes \
    AIRFLOW__CORE__LOAD_EXAMPLES=False
