"""The `correlake` commands, one module each, each with `add_parser(subparsers)`, which
returns its parser, and `main(args) -> int`, its exit code (`errors.py`). Light to import:
what needs Spark is imported when a command runs."""
