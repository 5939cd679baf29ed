"""The first stage: rerun the program with dumps on (``rerun``, kept as a ``record``), with a
start-up hook in every Python process (``hook``) that records what each one was doing
(``evidence``, read back by ``evidence_files``); which process failed (``processes``) and the
arguments it ran with (``arguments``)."""
