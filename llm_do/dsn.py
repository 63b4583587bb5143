"""Database URLs kept out of what llm-do writes down: error texts and log lines show no URL and no password."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["scrubbed"]

_USER_PASSWORD = re.compile(r"://[^/@:]*:([^/@]*)@")


def scrubbed(text: str, url: str) -> str:
    """`text` without `url`, its password, or any part of them that a driver may have quoted (each shown as `***`)."""
    secrets = {url, unquote(url)}
    for value in _passwords(url):
        if value:
            secrets |= {value, unquote(value)}
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _passwords(url: str) -> list[str]:
    """The passwords `url` holds: after the user name, in `?password=`, or in `password=` of a `key=value` string
    (found even in a URL `urlsplit` refuses)."""
    found = [word.partition("=")[2].strip("'") for word in url.split() if word.startswith("password=")]
    try:
        parts = urlsplit(url)
        found += [parts.password or "", *parse_qs(parts.query).get("password", [])]
    except ValueError:  # an unclosed `[` of an IPv6 host, say: the user part is still read
        found += _USER_PASSWORD.findall(url)
    return found
