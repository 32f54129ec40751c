"""SLOs: the model, slo-generator adapter, pure burn-rate math, windows and naming conventions."""
