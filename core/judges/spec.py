"""Internal: Judges from short specs (the CLI's ``--judge``) and the default judge.

=====================================  ============================================================
spec                                   judge
=====================================  ============================================================
``offline``                            ``OfflineJudge()`` (no model, no network)
``openai`` / ``openai:MODEL``          ``OpenAIJudge(MODEL)`` (default gpt-4o-mini); endpoint from
                                       ``OPENAI_BASE_URL`` when set
``openai:MODEL@URL``                   ``OpenAIJudge(MODEL, base_url=URL)``: any OpenAI-compatible
                                       server (vLLM, LM Studio, llama.cpp ...)
``anthropic`` / ``anthropic:MODEL``    ``AnthropicJudge(MODEL)`` (default claude-haiku-4-5);
``anthropic:MODEL@URL``                with ``base_url=URL``
``ollama:MODEL`` / ``ollama:MODEL@URL`` ``OpenAIJudge(MODEL)`` on Ollama's OpenAI-compatible API
                                       (``OLLAMA_HOST`` or http://localhost:11434), named
                                       ``ollama:MODEL``
``cascade:offline>SPEC``               ``CascadeJudge(OfflineJudge(), judge_from_spec(SPEC))``: the
``cascade:offline>SPEC?route=0.3``     offline judge first, the samples it is unsure of to the judge
``cascade:offline>SPEC?confidence=0.8`` of SPEC (default: ``route=0.2``)
=====================================  ============================================================
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ragmeter.judges.base import Judge

__all__ = [
    "judge_from_spec",
    "default_judge",
    "default_judge_notice",
    "resolve_judge",
    "SPECS",
    "SPEC_HELP",
    "spec_help",
    "load_plugins",
]


def _split(rest: str) -> tuple[str | None, str | None]:
    """``MODEL[@URL]`` -> (model or None, url or None). The model part may itself contain ``:``."""
    model, url = rest, None
    if "@" in rest:
        model, at = rest.split("@", 1)
        url = at.strip() or None
        if url is not None and "://" not in url:
            raise ValueError(f"judge spec: {url!r} is not a URL (expected e.g. http://host:port/v1)")
    return model.strip() or None, url


def _offline(spec: str, model: str | None, url: str | None, kwargs: dict) -> Judge:
    if model or url:
        raise ValueError(f"judge spec {spec!r}: 'offline' takes no model or URL")
    from ragmeter.judges.offline import OfflineJudge

    return OfflineJudge(**kwargs)


def _openai(spec: str, model: str | None, url: str | None, kwargs: dict) -> Judge:
    from ragmeter.judges.openai import OpenAIJudge

    return OpenAIJudge(model or "gpt-4o-mini", base_url=url, **kwargs)


def _anthropic(spec: str, model: str | None, url: str | None, kwargs: dict) -> Judge:
    from ragmeter.judges.anthropic import DEFAULT_MODEL, AnthropicJudge

    return AnthropicJudge(model or DEFAULT_MODEL, base_url=url, **kwargs)


def _ollama(spec: str, model: str | None, url: str | None, kwargs: dict) -> Judge:
    if not model:
        raise ValueError(f"judge spec {spec!r}: name the model, e.g. ollama:llama3.1")
    from ragmeter.judges.openai import OpenAIJudge

    host = url or os.environ.get("OLLAMA_HOST") or "http://localhost:11434"
    if "://" not in host:
        host = "http://" + host
    base = host.rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    kwargs.setdefault("embedder", None)
    kwargs.setdefault("name", f"ollama:{model}")  # the spec's name, not the transport's ("openai:...")
    return OpenAIJudge(model, base_url=base, api_key=kwargs.pop("api_key", None) or "ollama", **kwargs)


def _cascade(spec: str, model: str | None, url: str | None, kwargs: dict) -> Judge:
    # ``model`` is the raw rest of the spec here: "offline>openai:gpt-4o-mini[?route=0.3]".
    from ragmeter.judges.cascade import CascadeJudge

    rest = model or ""
    options: dict[str, float] = {}
    if "?" in rest:
        head, _, query = rest.rpartition("?")
        for part in query.split("&"):
            key, _, value = part.partition("=")
            if key.strip() not in ("route", "confidence"):
                raise ValueError(
                    f"judge spec {spec!r}: unknown cascade option {key.strip()!r} (route=SHARE or confidence=CUT)"
                )
            try:
                options[key.strip()] = float(value)
            except ValueError:
                raise ValueError(f"judge spec {spec!r}: {key.strip()}= needs a number, got {value!r}") from None
        rest = head
    first, sep, then = rest.partition(">")
    if not sep or not first.strip() or not then.strip():
        raise ValueError(
            f"judge spec {spec!r}: expected cascade:offline>JUDGE, e.g. cascade:offline>openai:gpt-4o-mini"
        )
    if first.strip().lower() != "offline":
        raise ValueError(f"judge spec {spec!r}: a cascade starts with the offline judge (cascade:offline>JUDGE)")
    if then.strip().lower().startswith(("cascade", "offline")):
        raise ValueError(f"judge spec {spec!r}: the judge after '>' must be an LLM judge, got {then.strip()!r}")
    return CascadeJudge(judge_from_spec("offline"), judge_from_spec(then.strip(), **kwargs), **options)


#: The judge-spec registry: backend -> (form shown in help, builder). Adding a backend is one entry
#: here, or one entry point in another package (group ``ragmeter.judges``, :mod:`ragmeter.plugins`).
SPECS: dict[str, tuple[str, Callable[[str, str | None, str | None, dict], Judge]]] = {
    "offline": ("offline", _offline),
    "openai": ("openai[:MODEL][@BASE_URL]", _openai),
    "anthropic": ("anthropic[:MODEL][@BASE_URL]", _anthropic),
    "ollama": ("ollama:MODEL[@BASE_URL]", _ollama),
    "cascade": ("cascade:offline>JUDGE[?route=SHARE]", _cascade),
}

#: The ``--judge`` help, generated from :data:`SPECS` (plugins included: :func:`spec_help`, read when asked).
SPEC_HELP: str

_PLUGINS = threading.Lock()
_plugins_loaded = False


def _plugin_problem(name: str, obj: Any) -> str | None:
    """Why the object of the ``ragmeter.judges`` entry point ``name`` is no judge builder to register."""
    if not callable(obj):
        return f"expected a builder fn(spec, model, url, kwargs) -> Judge, got {obj!r:.80}"
    if name in SPECS or not name or any(c in name for c in ":@ "):
        return f"ragmeter already has a judge spec {name!r}" if name in SPECS else f"{name!r} is no spec prefix"
    return None


def load_plugins() -> None:
    """Register the judge backends of installed plugins (the ``ragmeter.judges`` entry-point group,
    see :mod:`ragmeter.plugins`) in :data:`SPECS`, once: ``--judge NAME:MODEL@URL`` then calls the
    plugin's builder ``fn(spec, model, url, kwargs)``. A plugin that cannot be registered is
    reported and left out."""
    global _plugins_loaded
    with _PLUGINS:
        if _plugins_loaded:
            return
        _plugins_loaded = True
        from ragmeter.plugins import load_group

        def register(name: str, build: Any) -> str | None:
            problem = _plugin_problem(name, build)
            if problem is None:
                SPECS[name] = (getattr(build, "spec_form", f"{name}[:MODEL][@BASE_URL]"), _checked(name, build))
            return problem

        load_group("ragmeter.judges", register)


def _checked(name: str, build: Callable[..., Any]) -> Callable[[str, str | None, str | None, dict], Judge]:
    """A plugin's builder whose result is checked: a Judge, else a TypeError naming the plugin."""

    def builder(spec: str, model: str | None, url: str | None, kwargs: dict) -> Judge:
        judge = build(spec, model, url, kwargs)
        if not isinstance(judge, Judge):
            raise TypeError(f"judge plugin {name!r} built {type(judge).__name__}, not a ragmeter Judge")
        return judge

    return builder


def spec_help() -> str:
    """The ``--judge`` help: every form of :data:`SPECS` (plugins included) and examples."""
    load_plugins()
    return (
        " | ".join(form for form, _ in SPECS.values())
        + " (e.g. openai:gpt-4o-mini, anthropic:claude-haiku-4-5, openai:qwen2.5@http://localhost:8000/v1)"
    )


def __getattr__(name: str) -> Any:
    """``SPEC_HELP``: :func:`spec_help`, read when asked."""
    if name == "SPEC_HELP":
        return spec_help()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def judge_from_spec(spec: str, **kwargs: Any) -> Judge:
    """Build the judge a spec names (see the module table); ``kwargs`` go to the judge.

    Raises ValueError for an unknown spec (listing the known forms) or a missing API key.
    """
    load_plugins()
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"empty judge spec; expected {spec_help()}")
    text = spec.strip()
    backend, _, rest = text.partition(":")
    backend = backend.strip().lower()
    if "@" in backend:  # "openai@http://..." without a model
        backend, at = backend.split("@", 1)
        rest = "@" + at + (":" + rest if rest else "")
    if backend not in SPECS:
        raise ValueError(f"unknown judge spec {spec!r}; expected {spec_help()}")
    if backend == "cascade":  # its rest is two judge specs, parsed by the builder
        return SPECS[backend][1](spec, rest.strip() or None, None, kwargs)
    model, url = _split(rest) if rest else (None, None)
    return SPECS[backend][1](spec, model, url, kwargs)


def default_judge() -> Judge:
    """The judge to use when none is given: ``$RAGMETER_JUDGE`` when set; else OpenAI when
    ``OPENAI_API_KEY`` is set; else Anthropic when ``ANTHROPIC_API_KEY`` is set; else the
    offline judge."""
    spec = os.environ.get("RAGMETER_JUDGE", "").strip()
    if spec:
        return judge_from_spec(spec)
    if os.environ.get("OPENAI_API_KEY"):
        return judge_from_spec("openai")
    if os.environ.get("ANTHROPIC_API_KEY"):
        return judge_from_spec("anthropic")
    return judge_from_spec("offline")


def default_judge_notice(judge: Judge | str | None, environ: dict | None = None) -> str | None:
    """The notice to show once when ``judge`` (a Judge or its name, as on a run's result) is the
    offline judge that :func:`default_judge` picked because no API key (and no
    ``RAGMETER_JUDGE``) was found; None otherwise (an LLM judge, or a key in the environment).
    Call it only when no judge was asked for. ``environ``: the environment (default ``os.environ``).

    >>> from ragmeter.judges.offline import OfflineJudge
    >>> print(default_judge_notice(OfflineJudge(embeddings=False), environ={}))  # doctest: +ELLIPSIS
    offline judge picked because no API key was found (offline-lexical: ...); set OPENAI_API_KEY ...
    """
    env = os.environ if environ is None else environ
    name = (judge if isinstance(judge, str) else getattr(judge, "name", "")) or ""
    if not name.startswith("offline"):
        return None
    if any((env.get(k) or "").strip() for k in ("RAGMETER_JUDGE", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")):
        return None
    signals = (
        "lexical and embedding signals"
        if name == "offline"
        else 'lexical signals only, pip install "ragmeter[local]" adds embeddings'
    )
    return (
        f"offline judge picked because no API key was found ({name}: {signals}); set OPENAI_API_KEY "
        f"or ANTHROPIC_API_KEY, or pass --judge openai:gpt-4o-mini (or RAGMETER_JUDGE), to use an LLM judge"
    )


def resolve_judge(judge: Any, metrics: Sequence[Any] = ()) -> Judge | None:
    """A Judge from a Judge, a spec string (``"offline"``, ``"openai:gpt-4o-mini"``) or None,
    checked (:meth:`Judge.check`): ValueError naming what is missing (an API key, a model name)
    when it cannot work, ImportError when its SDK is not installed. No request is made.

    None resolves to :func:`default_judge` only when some metric needs a judge (``uses_judge``).
    """
    if isinstance(judge, str):
        judge = judge_from_spec(judge)
    elif judge is None and any(m.uses_judge for m in metrics):
        judge = default_judge()
    if isinstance(judge, Judge):
        judge.check()
    return judge
