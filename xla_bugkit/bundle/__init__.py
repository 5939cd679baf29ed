"""The bug bundle: what goes in (``layout``), filling its staging folder (``build``), the
issue text (``issue``), and the manifest that lists and checks it all (``manifest``)."""
