"""Replay one dumped module in a child process and judge what it shows.

``inputs`` finds what a replay needs (``ReplayInput``) in a dump or a bundle; ``judge`` starts
the child and gives the ``Verdict``; ``worker`` is the child, which speaks ``protocol`` to its
parent and reaches jaxlib only through ``_jaxlib``; ``opbyop`` and ``compare`` are the
wrong-result references; ``hlo_proto`` and ``literal`` read XLA's protos without TensorFlow;
``limits`` is the memory policy for modules from elsewhere; ``dump`` replays straight from a
dump folder. Nothing is imported here: the child starts with what it needs and no more.
"""
