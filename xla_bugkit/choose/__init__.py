"""Choose the modules that matter: index what XLA dumped (``dumps``), search it for a symbol
(``search``), and weigh the run's evidence into the modules to replay (``selection``, with
``allocation``'s evidence for an out-of-memory failure)."""
