"""The first stage: rerun the program with dumps on (``rerun``), with a start-up hook in
every Python process (``hook``) that records what each one was doing (``evidence``); which
process failed (``processes``) and the arguments it ran with (``arguments``)."""
