"""The SLO paths `opsctl slo` commands take (slo_cmd.py, slo_files_cmd.py): files, directories, or
an SLO name of the configured dir, with their shell completion."""

from __future__ import annotations


def slo_paths(app, paths):
    """The files and directories given, an SLO name of the configured dir standing for its file
    (`opsctl slo report llm-inference-databricks-availability`); none: the configured dir."""
    if not paths:
        return [app.config.slo_dir]
    from pathlib import Path

    named = [p for p in paths if not Path(p).exists() and "/" not in p and not p.endswith((".yaml", ".yml"))]
    if not named:
        return list(paths)
    from opsctl.slo.loading import load_slos

    cfg = app.config
    files = {s.name: s.file for s in load_slos([cfg.slo_dir], cfg.backends, config=cfg)}
    return [files.get(p, p) for p in paths]


def complete_slo(ctx, param, incomplete):
    """The SLO names of the configured dir that match, else files (complete.names_or_files)."""
    from opsctl.cli.complete import names_or_files, slo_names

    return names_or_files(slo_names(ctx, param, incomplete), incomplete)
