"""The program's side of collect: rerun it with dumps on (``rerun``), index what XLA dumped
(``dumps``), and choose the modules that matter (``selection``)."""
