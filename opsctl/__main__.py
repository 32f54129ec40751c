import gc

# Raised before the first import of opsctl: importing even opsctl.cli.startup allocates (the
# interpreter's import hooks, e.g. setuptools' distutils shim) and could reach the default 700.
_found = gc.get_threshold()
gc.set_threshold(20_000, *_found[1:])

from opsctl.cli import startup  # noqa: E402

startup.pause(_found)  # before click and opsctl are imported: see opsctl/cli/startup.py

from opsctl.cli.main import run  # noqa: E402

run()
