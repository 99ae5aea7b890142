"""Reward recipes: saved, named, versioned sets of reward terms (issue 9).

`terms` (the one registry of term kinds), `expressions` and `scoring` are pure Python and
import no Django: the worker and the run config import them too.
"""
