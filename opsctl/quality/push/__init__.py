"""Where probe figures go: MetricsSink protocol in base.py, one file per sink, a registry."""
