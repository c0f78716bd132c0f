"""What the tests share, in one place (not copied from test to test). Modules with
fixtures or hooks are registered in tests/conftest.py's ``pytest_plugins``; the rest are
imported by name:

- paths: the repository's folders and the two environments' programs
- ports: free TCP ports on 127.0.0.1
- moto: in-process moto S3 servers (fixture ``crawl_s3``, context manager ``moto_s3``)
- wire_faults: an HTTP proxy in front of moto or any HTTP server that throttles (503/500),
  resets connections mid-body, adds latency or denies (403), on purpose
- small_disk: a size-limited tmpfs that fills, for full-disk faults
- airflow_home: an Airflow home's environment and its ``airflow db migrate``
- airflow_standalone: a real ``airflow standalone`` for scheduler and UI tests
- dag_run: the session's whole DAG run and its services (fixtures)
- scheduler: the session's one real scheduler (`make standalone`) after two interrupted
  demos, for the backfill and left-behind-run tests (fixture ``scheduler``)
- echo_worker: a worker console script whose rephrase runs the echo engine, slowly
- events: a stand-in for Airflow's outlet-events accessor
- shards: prompt shards for the echo engine and for the real model
- run_folders: a committed run folder as stitch, rephrase and validate leave it
- postgres: a throwaway PostgreSQL database
- training: a fake generated run and a tiny tokenizer for the training smoke test
- dag_pods: both DAGs' pods under the kubernetes runner, built offline (.venv only)
- pod_standards: the Pod Security Standard "restricted" as a check of a pod
- run_report_fixture: a run folder plus its report, run with .venv-worker's python
- scripts: scripts/*.py loaded as modules
- git_clean: fails the session if the suite changed the source tree (a plugin)
"""
