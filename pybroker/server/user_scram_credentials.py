"""Users' SCRAM credentials as the admin APIs see them: Kafka's ``ZkAdminManager``
``describeUserScramCredentials`` and ``alterUserScramCredentials`` over the `ControllerStore`.

Owns the semantics of DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), apart
from the wire and authorization (``server/apis/``): which request entries are refused, with which
error and message, in which order the per-user results come, and what is written. A user's
credentials are keys of its config map, one per mechanism (``SCRAM-SHA-256``), each holding the
credential in Kafka's string form (`pybroker.security.scram.ScramCredential.format`); the store
keeps the map (``/config/users/<sanitized user>`` in ZooKeeper) and tells every broker of a
change, which refreshes its credential cache from it.

Describe (every user, or the named ones):

* every user: those with at least one SCRAM key, in Java's string order;
* named users: request order without repeats; an empty name is RESOURCE_NOT_FOUND "Username must
  not be empty", a name given twice DUPLICATE_RESOURCE, a user without credentials
  RESOURCE_NOT_FOUND "Attempt to describe a user credential that does not exist: <user>".

Alter: one result per user, a user's first failing check in this order deciding its answer (and
nothing of that user written): an empty name (UNACCEPTABLE_CREDENTIAL "Username must not be
empty"), an unknown mechanism (UNSUPPORTED_SASL_MECHANISM "Unknown SCRAM mechanism"), iterations
outside 4096..16384 (UNACCEPTABLE_CREDENTIAL "Too few iterations" / "Too many iterations") — an
upsertion's complaint winning over a deletion's for the same user, as Kafka merges its maps —
then the same (user, mechanism) twice in the request (DUPLICATE_RESOURCE), then the deletion of a
credential the user does not have (RESOURCE_NOT_FOUND). The others get their deletions and
upsertions applied to their stored map (StoredKey and ServerKey computed here from the client's
salted password: the password never reaches the broker) and written, one write per user. Results
come grouped in that order: refused entries, duplicates, missing credentials, failures to write,
successes, each group in request order (Kafka iterates Scala maps and sets there, which keep
insertion order up to four entries).

As in Kafka, a salted password the broker cannot use (empty) fails every user that passed the
checks with UNKNOWN_SERVER_ERROR, since Kafka prepares all users' changes in one loop per user.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pybroker.common.errors import ErrorCode
from pybroker.controller.store import ControllerStore
from pybroker.security.scram import (
    ScramCredential,
    ScramCredentialFormatError,
    ScramMechanism,
    credential_from_salted_password,
)

log = logging.getLogger(__name__)

# AlterUserScramCredentials' upper bound (ZkAdminManager's maxIterations); the lower bound is the
# mechanism's minimum (4096 for both).
MAX_ITERATIONS = 16384

USERNAME_MUST_NOT_BE_EMPTY = "Username must not be empty"
UNKNOWN_SCRAM_MECHANISM = "Unknown SCRAM mechanism"
TOO_FEW_ITERATIONS = "Too few iterations"
TOO_MANY_ITERATIONS = "Too many iterations"
ALTERED_TWICE = "A user credential cannot be altered twice in the same request"
DELETE_MISSING = "Attempt to delete a user credential that does not exist"
DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist"
DESCRIBED_TWICE = "Cannot describe SCRAM credentials for the same user twice in a single request"


class Upsertion(Protocol):
    """A ScramCredentialUpsertion of the request (name, mechanism byte, iterations, salt, salted password)."""

    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


class Deletion(Protocol):
    """A ScramCredentialDeletion of the request (name, mechanism byte)."""

    name: str
    mechanism: int


@dataclass(frozen=True)
class AlterResult:
    user: str
    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True)
class DescribeResult:
    user: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    #: (mechanism byte, iterations), SCRAM-SHA-256 first.
    credentials: list[tuple[int, int]] = field(default_factory=list)


def java_string_order(text: str) -> bytes:
    """A sort key giving Java's ``String.compareTo`` order (UTF-16 code units)."""
    return text.encode("utf-16-be", "surrogatepass")


def has_scram_credential(config: dict[str, str]) -> bool:
    return any(mechanism.mechanism_name in config for mechanism in ScramMechanism)


def _describe_one(user: str, config: dict[str, str]) -> DescribeResult:
    try:
        infos = [(mechanism.type, ScramCredential.parse(config[mechanism.mechanism_name]).iterations)
                 for mechanism in ScramMechanism if mechanism.mechanism_name in config]
    except ScramCredentialFormatError as e:  # bad data written by someone else
        log.error("The stored SCRAM credentials of user %r cannot be read: %s", user, e)
        return DescribeResult(user, ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.UNKNOWN_SERVER_ERROR.message)
    return DescribeResult(user, credentials=infos)


async def describe_user_scram_credentials(store: ControllerStore, users: Sequence[str] | None) -> list[DescribeResult]:
    """Kafka's ``describeUserScramCredentials``: ``users`` None or empty means every user."""
    if not users:
        configs = await store.read_user_configs(None)
        return [_describe_one(user, configs[user])
                for user in sorted(configs, key=java_string_order) if has_scram_credential(configs[user])]
    results: dict[str, DescribeResult] = {}
    counts: dict[str, int] = {}
    for user in users:
        counts[user] = counts.get(user, 0) + 1
    for user in counts:
        if user == "":
            results[user] = DescribeResult(user, ErrorCode.RESOURCE_NOT_FOUND, USERNAME_MUST_NOT_BE_EMPTY)
        elif counts[user] > 1:
            results[user] = DescribeResult(user, ErrorCode.DUPLICATE_RESOURCE, f"{DESCRIBED_TWICE}: {user}")
    wanted = [user for user in counts if user not in results]
    configs = await store.read_user_configs(wanted) if wanted else {}
    for user in wanted:
        config = configs.get(user, {})
        results[user] = (_describe_one(user, config) if has_scram_credential(config) else
                         DescribeResult(user, ErrorCode.RESOURCE_NOT_FOUND, f"{DESCRIBE_MISSING}: {user}"))
    return [results[user] for user in counts]


def _mechanism_name(mechanism: int) -> str:
    """The name of a mechanism `_refusal` let through."""
    scram = ScramMechanism.for_type(mechanism)
    if scram is None:  # refused before: UNKNOWN_SCRAM_MECHANISM
        raise ValueError(f"Unknown SCRAM mechanism {mechanism}")
    return scram.mechanism_name


def _refusal(name: str, mechanism: int, iterations: int | None) -> str | None:
    """Why an upsertion (``iterations`` given) or a deletion is refused, or None."""
    if name == "":
        return USERNAME_MUST_NOT_BE_EMPTY
    scram = ScramMechanism.for_type(mechanism)
    if scram is None:
        return UNKNOWN_SCRAM_MECHANISM
    if iterations is not None:
        if iterations > MAX_ITERATIONS:
            return TOO_MANY_ITERATIONS
        if iterations < scram.min_iterations:
            return TOO_FEW_ITERATIONS
    return None


async def alter_user_scram_credentials(
    store: ControllerStore, upsertions: Sequence[Upsertion], deletions: Sequence[Deletion],
) -> list[AlterResult]:
    """Kafka's ``alterUserScramCredentials`` (see the module docstring); writes through ``store``."""
    results: list[AlterResult] = []
    refused: dict[str, str] = {}
    for deletion in deletions:
        if (reason := _refusal(deletion.name, deletion.mechanism, None)) is not None:
            refused[deletion.name] = reason
    for upsertion in upsertions:
        if (reason := _refusal(upsertion.name, upsertion.mechanism, upsertion.iterations)) is not None:
            refused[upsertion.name] = reason
    for user, reason in refused.items():
        error = ErrorCode.UNSUPPORTED_SASL_MECHANISM if reason == UNKNOWN_SCRAM_MECHANISM else ErrorCode.UNACCEPTABLE_CREDENTIAL
        results.append(AlterResult(user, error, reason))

    pairs = [(entry.name, entry.mechanism) for entry in [*upsertions, *deletions] if entry.name not in refused]
    seen: set[tuple[str, int]] = set()
    duplicated: dict[str, None] = {}
    for pair in pairs:
        if pair in seen:
            duplicated[pair[0]] = None
        seen.add(pair)
    first_seen = {user: None for user, _ in pairs}
    results.extend(AlterResult(user, ErrorCode.DUPLICATE_RESOURCE, ALTERED_TWICE)
                   for user in first_seen if user in duplicated)

    candidates = [user for user in first_seen if user not in duplicated]
    if not candidates:
        return results
    configs = await store.read_user_configs(candidates)
    missing: dict[str, None] = {}
    for deletion in deletions:
        if deletion.name in configs and _mechanism_name(deletion.mechanism) not in configs[deletion.name]:
            missing[deletion.name] = None
    results.extend(AlterResult(user, ErrorCode.RESOURCE_NOT_FOUND, DELETE_MISSING) for user in missing)

    to_alter = [user for user in candidates if user not in missing]
    try:
        for deletion in deletions:
            if deletion.name in to_alter:
                configs[deletion.name].pop(_mechanism_name(deletion.mechanism))
        for upsertion in upsertions:
            if upsertion.name in to_alter:
                mechanism = ScramMechanism.for_type(upsertion.mechanism)
                assert mechanism is not None
                credential = credential_from_salted_password(
                    mechanism, bytes(upsertion.salt), bytes(upsertion.salted_password), upsertion.iterations)
                configs[upsertion.name][mechanism.mechanism_name] = credential.format()
    except ValueError as e:
        log.info("Error encountered while altering user SCRAM credentials: %s", e)
        results.extend(AlterResult(user, ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.UNKNOWN_SERVER_ERROR.message)
                       for user in to_alter)
        return results

    succeeded: list[str] = []
    for user in to_alter:
        try:
            await store.set_user_configs(user, configs[user])
        except Exception:
            log.exception("Error encountered while writing the SCRAM credentials of user %r", user)
            results.append(AlterResult(user, ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.UNKNOWN_SERVER_ERROR.message))
        else:
            succeeded.append(user)
    results.extend(AlterResult(user, ErrorCode.NONE) for user in succeeded)
    return results
