"""Keep the project's own test run out of these programs.

Each folder here is a user's program that fails inside XLA on purpose (see
benchmarks/shapes.py); pytest_crash/ holds a user's test file, which would abort the
project's pytest run if it were collected from here.
"""

collect_ignore_glob = ["*"]
