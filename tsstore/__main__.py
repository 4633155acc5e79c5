"""``python -m tsstore`` runs the CLI."""

from tsstore.cli import main

main()
