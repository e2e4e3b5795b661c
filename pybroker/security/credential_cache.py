"""The SCRAM credentials this broker authenticates against (Kafka's ``CredentialCache``).

Filled from the store's user configs (``/config/users/<user>`` in ZooKeeper mode, the local store
for a single broker) at start and on every change notification, as Kafka's ``CredentialProvider``
does: for each SCRAM mechanism enabled on this broker, a user's config key of that mechanism's
name (``SCRAM-SHA-256``) holds the credential in Kafka's string form; no key, no credential.
SCRAM servers look users up here, one dict lookup per authentication.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from pybroker.security.scram import ScramCredential, ScramCredentialFormatError, ScramMechanism

log = logging.getLogger(__name__)


class CredentialCache:
    """User → credential, per SCRAM mechanism enabled on this broker."""

    def __init__(self, enabled_mechanisms: Iterable[str] = ()) -> None:
        self._by_mechanism: dict[ScramMechanism, dict[str, ScramCredential]] = {
            mechanism: {} for name in enabled_mechanisms if (mechanism := ScramMechanism.for_name(name)) is not None
        }

    def get(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        credentials = self._by_mechanism.get(mechanism)
        return None if credentials is None else credentials.get(user)

    def update_user(self, user: str, config: Mapping[str, str]) -> None:
        """Replace ``user``'s credentials by those in its config (Kafka's ``updateCredentials``);
        a credential that cannot be parsed is dropped with a warning."""
        for mechanism, credentials in self._by_mechanism.items():
            text = config.get(mechanism.mechanism_name)
            if text is None:
                credentials.pop(user, None)
                continue
            try:
                credentials[user] = ScramCredential.parse(text)
            except ScramCredentialFormatError as e:
                log.warning("Ignoring the %s credential of user %r: %s", mechanism.mechanism_name, user, e)
                credentials.pop(user, None)
