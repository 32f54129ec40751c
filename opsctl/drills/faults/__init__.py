"""Fault injectors: one interface (base.py), one file per way of injecting a fault, a registry."""
