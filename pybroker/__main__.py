"""``python -m pybroker`` runs the same command line as the ``pybroker`` script."""

from pybroker.cli.main import main

raise SystemExit(main())
