"""``python -m tsstore`` runs the CLI."""

from .cli import main

main()
