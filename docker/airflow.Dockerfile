# The Airflow image: scheduler, API server, triggerer, DAG processor and workers that
# only *launch* steps (KubernetesPodOperator). No vLLM, torch, Spark or Ray here.
FROM apache/airflow:3.3.2-python3.11

USER root
COPY --chown=airflow:root pyproject.toml README.md /opt/synthfactory/
COPY --chown=airflow:root synthfactory/__init__.py /opt/synthfactory/synthfactory/__init__.py
USER airflow
RUN pip install --no-cache-dir \
      "apache-airflow==3.3.2" \
      "apache-airflow-providers-cncf-kubernetes==10.25.0" \
      "apache-airflow-providers-amazon==9.39.0" \
      "apache-airflow-providers-standard==1.21.0"

COPY --chown=airflow:root dags/ /opt/airflow/dags/
COPY --chown=airflow:root operators/ /opt/synthfactory/operators/
COPY --chown=airflow:root plugins/ /opt/airflow/plugins/
COPY --chown=airflow:root plugins/ /opt/synthfactory/plugins/

ENV PYTHONPATH=/opt/synthfactory \
    SYNTHFACTORY_RUNNER=kubernetes \
    AIRFLOW__CORE__LOAD_EXAMPLES=False
