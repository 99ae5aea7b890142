"""The arena: replay an episode step by step, compare runs, and play models side by side."""
