"""What tests share that is not a fixture: programs and how to run them (``programs``),
hostile archives (``hostile``). Fixtures live in the conftest.py files."""
