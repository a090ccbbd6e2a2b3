"""`python -m neurondesk.cli ...`: the `neurondesk` command."""

from neurondesk.cli.main import main

raise SystemExit(main())
