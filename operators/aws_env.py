"""An Airflow AWS connection turned into the standard AWS environment variables.

The engine reads only the standard AWS configuration (``AWS_ENDPOINT_URL``, keys,
region), so the local runner hands a connection's resolved credentials to the step's
subprocess this way. Pods get theirs from a Kubernetes secret instead (``envFrom``).
"""

from __future__ import annotations


def aws_environment(aws_conn_id: str) -> dict[str, str]:
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    hook = AwsBaseHook(aws_conn_id=aws_conn_id, client_type="s3")
    creds = hook.get_credentials()  # also masks the secret in task logs
    env = {"AWS_ACCESS_KEY_ID": creds.access_key, "AWS_SECRET_ACCESS_KEY": creds.secret_key}
    if creds.token:
        env["AWS_SESSION_TOKEN"] = creds.token
    config = hook.conn_config
    endpoint = config.get_service_endpoint_url("s3")
    if endpoint:
        env["AWS_ENDPOINT_URL"] = endpoint
    if config.region_name:
        env["AWS_DEFAULT_REGION"] = env["AWS_REGION"] = config.region_name
    return env
