"""The command-line edge: thin commands, each mapping to one function."""
