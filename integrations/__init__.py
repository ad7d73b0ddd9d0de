"""Framework integrations: ``ragmeter.integrations.langchain`` and ``ragmeter.integrations.llamaindex``
turn their framework's events into :class:`ragmeter.Sample` objects and hand them to the core.
Each imports its own framework: import only the one you use."""
