"""One module per `opendla` subcommand: each defines add_parser(subparsers) and run(args) -> int."""
