import sys

from .run import EXIT_USAGE, main

try:
    code = main()
except SystemExit as e:
    if not isinstance(e.code, str):
        raise
    # the harness's one-line refusals before any load (a bad option, a target it cannot use)
    # exit as argparse's usage errors do, apart from a run that failed (1)
    print(e.code, file=sys.stderr)
    code = EXIT_USAGE
sys.exit(code)
