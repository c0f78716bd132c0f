"""An Airflow connection turned into the Hugging Face token of ``export --hub-repo``: its
password as ``$HF_TOKEN`` (what huggingface_hub reads), never argv. Masked in task logs."""

from __future__ import annotations

from synthfactory.contract.names import HUB_TOKEN_ENV


class HubConnectionError(ValueError):
    pass


def hub_environment(conn_id: str) -> dict[str, str]:
    from airflow.sdk import BaseHook
    from airflow.sdk.log import mask_secret

    conn = BaseHook.get_connection(conn_id)
    if not conn.password:
        raise HubConnectionError(f"hub_conn_id {conn_id!r}: the connection has no password "
                                 "(the Hugging Face token)")
    mask_secret(conn.password)
    return {HUB_TOKEN_ENV: conn.password}
