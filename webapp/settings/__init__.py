"""Settings split by purpose: base, local (default), test, production."""
