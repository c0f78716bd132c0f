"""An Airflow connection turned into the environment of the endpoint engine
(``rephrase --engine endpoint``): the server's URL, its model and its API key as
variables, never argv (which is logged and rendered in the UI).

The connection (type ``http`` or ``generic``): host = the URL (``http://host:8000``, or
a bare host with schema = http|https and port), password = the API key (optional),
extra ``{"model": "NAME"}`` = the served model (optional: the server's only one). The
key is masked in task logs.
"""

from __future__ import annotations

from synthfactory.contract import ENDPOINT_API_KEY_ENV, ENDPOINT_MODEL_ENV, ENDPOINT_URL_ENV


class EndpointConnectionError(ValueError):
    pass


def endpoint_url(host: str | None, port: int | None, schema: str | None) -> str:
    if not host:
        raise EndpointConnectionError("the connection has no host (the server's URL)")
    if "://" in host:
        url = host.rstrip("/")
        if port and f":{port}" not in url.split("://", 1)[1].split("/", 1)[0]:
            scheme, rest = url.split("://", 1)
            netloc, _, path = rest.partition("/")
            url = f"{scheme}://{netloc}:{port}" + (f"/{path}" if path else "")
        return url
    scheme = schema if schema in ("http", "https") else "http"
    return f"{scheme}://{host}" + (f":{port}" if port else "")


def endpoint_environment(conn_id: str) -> dict[str, str]:
    from airflow.sdk import BaseHook
    from airflow.sdk.log import mask_secret

    conn = BaseHook.get_connection(conn_id)
    try:
        url = endpoint_url(conn.host, conn.port, conn.schema)
    except EndpointConnectionError as exc:
        raise EndpointConnectionError(f"endpoint_conn_id {conn_id!r}: {exc}") from None
    env = {ENDPOINT_URL_ENV: url}
    model = (conn.extra_dejson or {}).get("model")
    if model:
        env[ENDPOINT_MODEL_ENV] = str(model)
    if conn.password:
        mask_secret(conn.password)  # the SDK masks it too; said here so it is never missed
        env[ENDPOINT_API_KEY_ENV] = conn.password
    return env
