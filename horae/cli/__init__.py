"""The ``horae`` command line. Each module here with a ``register(subparsers)`` adds subcommands."""
