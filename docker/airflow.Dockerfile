# The Airflow image: scheduler, API server, triggerer, DAG processor and workers that
# only *launch* steps (KubernetesPodOperator). No vLLM, torch, Spark or Ray here.
FROM apache/airflow:3.3.2-python3.11

COPY --chown=50000:0 pyproject.toml README.md /opt/synthfactory/
COPY --chown=50000:0 synthfactory/__init__.py /opt/synthfactory/synthfactory/__init__.py
# The image's airflow user by number, so that the kubelet can verify runAsNonRoot
# (the official Helm chart runs it as uid 50000, gid 0).
USER 50000
RUN pip install --no-cache-dir \
      "apache-airflow[postgres]==3.3.2" \
      "apache-airflow-providers-cncf-kubernetes==10.25.0" \
      "apache-airflow-providers-amazon==9.39.0" \
      "apache-airflow-providers-standard==1.21.0"

COPY --chown=50000:0 dags/ /opt/airflow/dags/
COPY --chown=50000:0 operators/ /opt/synthfactory/operators/
COPY --chown=50000:0 plugins/ /opt/airflow/plugins/
COPY --chown=50000:0 plugins/ /opt/synthfactory/plugins/
# the Airflow pools, imported by the Helm values' init container (deploy/airflow-values.yaml)
COPY --chown=50000:0 deploy/pools.json /opt/synthfactory/deploy/pools.json

ENV PYTHONPATH=/opt/synthfactory \
    SYNTHFACTORY_RUNNER=kubernetes \
    AIRFLOW__CORE__LOAD_EXAMPLES=False
