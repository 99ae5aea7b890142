"""Key derivation for the secrets store; importable from settings (no models, no Django setup)."""

from __future__ import annotations

import base64
import hashlib


def fernet_key_from(passphrase: str) -> str:
    """A Fernet key derived from a passphrase (local and test settings derive it from SECRET_KEY)."""
    return base64.urlsafe_b64encode(hashlib.sha256(f"envlab-secrets:{passphrase}".encode()).digest()).decode()
