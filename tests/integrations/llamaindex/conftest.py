"""The LlamaIndex room's fixtures: a real VectorStoreIndex over the animal documents (``index``), a
scripted judge (``judge``), and the check that no test leaves a handler on LlamaIndex's dispatcher
(``no_handler_leak``, autouse); see :mod:`helpers.llamaindex_app`."""

from helpers.llamaindex_app import index, judge, no_handler_leak  # noqa: F401 (fixtures, registered here)
