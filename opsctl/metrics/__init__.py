"""Metric sources behind one interface: Prometheus-compatible servers and the embedded store."""
