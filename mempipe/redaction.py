"""The one scrubber: every text that leaves the process (an error recorded in the store, a
Prefect state message, event or log line, an artifact, a line printed) passes :func:`scrub`.

It knows every credential the process holds: the provider keys and store password of the
environment (``SECRET_ENVS``), and the store passwords and embedding models' own keys kept by
:mod:`mempipe.credentials` (from a URL, a variable or a Prefect Secret block, kept in the
environment too).
Three gates route everything through it, so that no new path has to remember to:

- :class:`mempipe.errors.MempipeError` scrubs its message when it is made, so every message made
  from one (Prefect's state message, the run's ``error``, the CLI's ``error:`` line) is clean;
- :func:`scrub_exception` cleans a foreign exception and the chain of causes below a mempipe
  error (the ``openai`` error a provider failure was translated from), where a traceback would
  print them;
- :func:`install` makes every log record of the process pass the scrubber as it is created
  (message and traceback alike), whatever handler then writes it: stderr, Prefect's API, a file.

This module imports nothing of mempipe: the error root itself depends on it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from urllib.parse import quote

REDACTED = "***"
PASSWORD_ENV = "MEMPIPE_STORE_PASSWORD"
KEPT_PREFIX = "MEMPIPE_STORE_PASSWORD_"
KEY_PREFIX = "MEMPIPE_PROVIDER_KEY_"
"""An embedding model's own key, kept under a name of this prefix (:mod:`mempipe.credentials`)."""
SECRET_ENVS = ("MEMPIPE_LLM_API_KEY", "OPENAI_API_KEY", PASSWORD_ENV)
"""Variables whose values are credentials."""
SHORTEST = 4
"""A value shorter than this is not scrubbed: it would blank ordinary words."""

_URL_PASSWORD = re.compile(r"://([^:/@\s]+):(?!\*\*\*@)[^@/\s]*@")


def known_secrets() -> list[str]:
    """Every credential of the process, in each form it may be printed (as is, URL-quoted),
    longest first so that a secret containing another is replaced whole."""
    kept = (n for n in os.environ if n.startswith((KEPT_PREFIX, KEY_PREFIX)))
    names = (*SECRET_ENVS, *kept)
    values = {os.environ[n] for n in names if os.environ.get(n)}
    forms = {form for value in values for form in (value, quote(value, safe=""))}
    return sorted((f for f in forms if len(f) >= SHORTEST), key=len, reverse=True)


def scrub(text: str) -> str:
    """``text`` without any credential this process knows, and without the password of any URL
    in it."""
    for secret in known_secrets():
        if secret in text:
            text = text.replace(secret, REDACTED)
    return _URL_PASSWORD.sub(rf"://\1:{REDACTED}@", text)


def scrub_exception(exc: BaseException) -> BaseException:
    """``exc`` and every exception it was raised from or during, their messages scrubbed in
    place (what ``str`` and a traceback print); returns ``exc``."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if any(isinstance(arg, str) for arg in current.args):
            current.args = tuple(scrub(a) if isinstance(a, str) else a for a in current.args)
        for attribute in ("message", "msg"):
            value = getattr(current, attribute, None)
            if isinstance(value, str):
                with contextlib.suppress(AttributeError):  # a read-only property
                    setattr(current, attribute, scrub(value))
        current = current.__cause__ or current.__context__
    return exc


def install() -> None:
    """Make every log record of this process scrubbed as it is made (idempotent)."""
    factory = logging.getLogRecordFactory()
    if getattr(factory, "scrubs", False):
        return

    def scrubbed_record(*args: object, **kwargs: object) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            message = str(record.msg)
        record.msg, record.args = scrub(message), None
        if record.exc_info and record.exc_info[1] is not None:
            scrub_exception(record.exc_info[1])
        return record

    scrubbed_record.scrubs = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(scrubbed_record)
