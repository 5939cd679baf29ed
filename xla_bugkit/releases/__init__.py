"""Other jaxlib releases to replay under: which there are (``index``: pip's index or a folder
of wheels), and the cache of those unpacked (``cache``), shared by ``bisect``, ``verify
--jaxlib`` and the ``cache`` command."""
