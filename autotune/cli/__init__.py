"""Command-line interface (argparse; no torch at import)."""
