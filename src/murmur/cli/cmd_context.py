"""``mur context``: the text an agent reads about delegating by capsule links (spec/links.md).

Inside a capsule session whose spawn set is non-empty, ``mur`` on ``PATH`` is the session's own
link (``links/bin/mur``), which prints that session's text. This command is the ``mur`` outside
any session: it prints the general form (how a link is called, its exit statuses, when not to
delegate) and exits 0.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options."""
    parser.description = ("Print the capsule-links text an agent reads. Inside a capsule session the "
                          "session's own `mur` link answers with its capsules; outside one this "
                          "prints the general form.")


def run(args: argparse.Namespace) -> int:
    """Print :func:`murmur.links.general_text`."""
    from murmur.links import general_text

    print(general_text(), end="")
    return 0
