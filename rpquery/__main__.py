"""``python -m rpquery`` runs the ``rpquery`` command line (same as the console script)."""

from rpquery.cli import main

if __name__ == "__main__":
    main(prog_name="rpquery")
