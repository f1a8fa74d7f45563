"""``python -m nova_queue`` runs the CLI."""

from nova_queue.cli import main

main()
