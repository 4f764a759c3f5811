"""Faithful ports of published reference implementations, used as timing and accuracy baselines.

Not part of the library: nothing in ``fairpca_dist`` imports from here.
"""
