"""Benchmarks (not tests): each compares against a baseline measured in the same run."""
