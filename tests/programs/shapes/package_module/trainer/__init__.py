"""A small training package, run as `python -m trainer.train` from this folder.

See trainer/train.py for what fails inside XLA.
"""
