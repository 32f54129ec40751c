"""opsctl: the on-call toolkit for an LLM inference service kept at four nines."""

__version__ = "0.1.0"
