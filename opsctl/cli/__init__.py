"""Thin Click commands, one module per group. Each is imported only when its group is invoked."""
