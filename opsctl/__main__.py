from opsctl.cli import startup

startup.pause()  # before click and opsctl are imported: see opsctl/cli/startup.py

from opsctl.cli.main import run  # noqa: E402

run()
