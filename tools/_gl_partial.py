# development-only: run one CLI subcommand module before all modules exist
import argparse, importlib, sys
mod = importlib.import_module(sys.argv[1])
p = argparse.ArgumentParser(); s = p.add_subparsers(); mod.register(s)
a = p.parse_args([mod.__name__.split("_")[-1]] + sys.argv[2:]); sys.exit(a.func(a))
