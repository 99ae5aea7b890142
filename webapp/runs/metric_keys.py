"""Metric keys the lab itself logs beside TRL's (no Django import: the worker's sink and
benchmarks import this before Django is set up)."""

# When each step was logged (epoch seconds), stored as a metric of the step: the run
# page's wall-time axis. Keys starting with "_" are not charts of their own.
WALL_TIME_KEY = "_wall_time"
