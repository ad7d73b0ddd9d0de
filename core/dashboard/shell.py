"""Internal: The frame of every HTML page ragmeter writes: the page template, the dashboard's style and script
(``assets/``), and the script's hash for the page's content security policy."""

from __future__ import annotations

import base64
import hashlib
from html import escape
from importlib import resources
from string import Template

__all__ = ["asset", "page_html"]


def asset(name: str) -> str:
    """The text of ``assets/<name>`` (``page.html``, ``dashboard.css``, ``dashboard.js``)."""
    return resources.files("ragmeter.dashboard").joinpath("assets", name).read_text(encoding="utf-8")


def page_html(title: str, body: str, js: str = "") -> str:
    """One self-contained page: ``body`` (HTML) in the page template with the dashboard's style,
    ``js`` as its only script (allowed by its SHA-256 in the content security policy)."""
    script_hash = "sha256-" + base64.b64encode(hashlib.sha256(f"\n{js}\n".encode()).digest()).decode("ascii")
    return Template(asset("page.html")).substitute(
        title=escape(title), css=asset("dashboard.css"), js=js, script_hash=script_hash, body=body
    )
