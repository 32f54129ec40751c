from opsctl.cli.main import main

main()
