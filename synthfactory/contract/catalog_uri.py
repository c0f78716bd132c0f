"""The catalog URI rules both sides apply: the embedded default, and "no password in a
URI that rides on argv or in a run's conf" (docs/adr/0070).

One regex is the rule: the DAG's ``catalog_uri`` Param takes it as its JSON-schema
``pattern`` (so it stays ECMAScript-compatible: no inline flags, case folded by
character classes) and ``has_password`` is its negation.
"""

from __future__ import annotations

import re

DEFAULT_CATALOG_DB = "var/catalog/catalog.db"  # relative to $SYNTHFACTORY_HOME
DEFAULT_WAREHOUSE = "var/warehouse"
PASSWORD_KEYS = ("password", "passwd", "pwd")

# ``[scheme://]user:password@``: also without a scheme, which urlsplit would misread.
# Group 1 is what comes before the password (redaction keeps it).
USERINFO = r"((?:[A-Za-z][A-Za-z0-9+.-]*://)?[^:/@?#\s]*):[^@/?#\s]+@"


def _any_case(word: str) -> str:
    return "".join(f"[{c.upper()}{c}]" for c in word)


# ``?password=x`` (or passwd, pwd; any case; a non-empty value) within the query.
QUERY_PASSWORD = (r"[^?#]*\?(?:[^#]*&)?(?:" + "|".join(map(_any_case, PASSWORD_KEYS))
                  + r")=[^&#]")
NO_PASSWORD_PATTERN = rf"^(?!{USERINFO})(?!{QUERY_PASSWORD})"


def has_password(uri: str) -> bool:
    """A password in the userinfo (``user:pw@host``) or in the query (``?password=``)."""
    return re.match(NO_PASSWORD_PATTERN, uri) is None


def default_catalog_uri(home: str) -> str:
    """The embedded SQLite catalog under ``home`` (an absolute path)."""
    return f"sqlite:///{home.rstrip('/')}/{DEFAULT_CATALOG_DB}"
