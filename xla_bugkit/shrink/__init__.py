"""Shrink a failing module: the smallest module that still fails the same way, the flags it
needs, the HLO pass behind it, and flags that work around it."""
