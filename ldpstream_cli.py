"""The ``ldpstream`` command: one entry point, one verb per part of the system."""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ldpstream", description=__doc__)
    sub = parser.add_subparsers(dest="verb", required=True)
    sub.add_parser("mechanisms", help="list the available ε-LDP mechanisms")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.verb == "mechanisms":
        import ldpcore

        for name in ldpcore.available_mechanisms():
            print(name)
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
