"""Named pause points, so fault tests kill a step at a chosen moment instead of a guess.

With ``SYNTHFACTORY_PAUSE_AT=NAME`` set, a step reaching ``pause_point(NAME)`` writes
``$SYNTHFACTORY_PAUSE_MARKER`` (when set) and sleeps until it is killed: the test
waits for the marker, sends SIGKILL, and reruns the step. With
``$SYNTHFACTORY_PAUSE_RELEASE`` set to a path, it goes on once that file exists (the
test changes the world meanwhile, e.g. cuts the catalog database off). A marker that
already exists means "paused once already": the point is passed (a restarted Ray actor
inherits the same environment and must not pause again). Unset (always, outside
tests), a pause point costs one dictionary lookup.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from synthfactory.contract import PAUSE_AT_ENV as PAUSE_ENV
from synthfactory.contract import PAUSE_MARKER_ENV as MARKER_ENV
from synthfactory.contract import PAUSE_RELEASE_ENV as RELEASE_ENV


def pause_point(name: str) -> None:
    if os.environ.get(PAUSE_ENV) != name:
        return
    marker = os.environ.get(MARKER_ENV)
    if marker:
        if Path(marker).exists():
            return  # once per marker: a restarted process (a Ray actor) goes on
        Path(marker).write_text(f"{os.getpid()} paused at {name}\n")
    release = os.environ.get(RELEASE_ENV)
    while not (release and Path(release).exists()):  # until SIGKILL, or released
        time.sleep(0.2)
