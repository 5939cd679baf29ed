"""What tests share that is not a fixture: real programs and how to run them (``programs``),
real dumps of small programs (``dumps``), bundles built by hand (``bundles``) and hostile
archives (``hostile``). Fixtures live in the conftest.py files."""
