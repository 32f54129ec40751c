"""Rollouts: the migration as one plan (plan file, calendar around the freezes, timeline)."""
