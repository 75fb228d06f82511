import os
import sys

from .run import EXIT_USAGE, main

try:
    code = main()
    sys.stdout.flush()  # here, not at exit, where a closed pipe's error could not be caught
except SystemExit as e:
    if not isinstance(e.code, str):
        raise
    # the harness's one-line refusals before any load (a bad option, a target it cannot use)
    # exit as argparse's usage errors do, apart from a run that failed (1)
    print(e.code, file=sys.stderr)
    code = EXIT_USAGE
except BrokenPipeError:
    # the reader of stdout went away (``python -m loadtest scenarios | head -1``): as a Unix
    # command, quietly; stdout pointed at /dev/null so that the exit's own flush finds no pipe
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    code = 1
sys.exit(code)
