"""Migration and quality checks: output consistency between backends (probe), shadow readiness,
A/B equivalence (TOST) and cost per million tokens."""
