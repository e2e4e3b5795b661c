"""BROKER_LOGGER resources: this broker's logger levels, described and changed at run time.

Owns Kafka's ``Log4jController`` semantics over Python's ``logging``: the loggers a broker
reports (``root`` and every logger the process created, pybroker's own named after their
modules, ``pybroker.server.broker``, ``pybroker.log.cleaner`` …), each with its effective level
in log4j's names, and SET / DELETE of a level (DELETE: the logger inherits its parent's level
again; ``root`` cannot be unset). Changes are in memory and for this broker only, as in Kafka
(KIP-412): nothing is stored and a restart forgets them.

Level names are log4j's: TRACE, DEBUG, INFO, WARN, ERROR, FATAL (Python's 5, 10, 20, 30, 40, 50).
Kafka's own logger names are accepted too where pybroker has the same part (`KAFKA_LOGGER_ALIASES`:
``kafka`` → ``pybroker``, ``kafka.controller`` → ``pybroker.controller``, ``kafka.log.LogCleaner``
→ ``pybroker.log.cleaner`` …) and listed with the level of the logger they stand for, so that
kafka-configs.sh's ``--entity-type broker-loggers`` with Kafka's names works unchanged.
"""

from __future__ import annotations

import logging

ROOT_LOGGER = "root"
#: Kafka's LogLevelConfig.VALID_LOG_LEVELS, in the order Kafka's message lists them (a Java HashSet's).
VALID_LOG_LEVELS = ("WARN", "ERROR", "FATAL", "DEBUG", "TRACE", "INFO")
TRACE = 5
_TO_PYTHON = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
              "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}
#: Kafka's log4j logger names and the pybroker logger each one stands for.
KAFKA_LOGGER_ALIASES = {
    "kafka": "pybroker",
    "kafka.server": "pybroker.server",
    "kafka.controller": "pybroker.controller",
    "kafka.log": "pybroker.log",
    "kafka.log.LogCleaner": "pybroker.log.cleaner",
    "kafka.network": "pybroker.network",
    "kafka.coordinator.group": "pybroker.server.group",
    "kafka.coordinator.transaction": "pybroker.server.transaction",
    "kafka.zookeeper": "pybroker.zookeeper",
    "kafka.authorizer.logger": "pybroker.security",
}


class LoggerError(ValueError):
    """A logger change Kafka refuses: ``invalid_request`` tells INVALID_REQUEST from INVALID_CONFIG."""

    def __init__(self, message: str, invalid_request: bool = False) -> None:
        super().__init__(message)
        self.invalid_request = invalid_request


def log4j_level(level: int) -> str:
    """A Python level in log4j's name (the nearest at or below it)."""
    if level <= TRACE:
        return "TRACE"
    if level <= logging.DEBUG:
        return "DEBUG"
    if level <= logging.INFO:
        return "INFO"
    if level <= logging.WARNING:
        return "WARN"
    if level <= logging.ERROR:
        return "ERROR"
    return "FATAL"


def _python_name(name: str) -> str:
    return KAFKA_LOGGER_ALIASES.get(name, name)


def _existing(name: str) -> logging.Logger | None:
    """The logger ``name`` names if the process has it (or has loggers below it, whose parent it
    becomes); None otherwise (Kafka's ``LogManager.exists``)."""
    if name == ROOT_LOGGER:
        return logging.getLogger()
    python_name = _python_name(name)
    if python_name not in logging.Logger.manager.loggerDict:
        return None
    return logging.getLogger(python_name)


def logger_exists(name: str) -> bool:
    return _existing(name) is not None


def loggers() -> dict[str, str]:
    """Every logger with its effective level (Kafka's ``Log4jController.loggers``): root, every
    logger the process made, and Kafka's names that stand for one."""
    out = {ROOT_LOGGER: log4j_level(logging.getLogger().getEffectiveLevel())}
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):
            out[name] = log4j_level(logger.getEffectiveLevel())
    for kafka_name, python_name in KAFKA_LOGGER_ALIASES.items():
        if python_name in logging.Logger.manager.loggerDict:
            out[kafka_name] = log4j_level(logging.getLogger(python_name).getEffectiveLevel())
    return out


def validate(op: int, name: str, level: str | None) -> None:
    """Kafka's ``validateLogLevelConfigs`` for one operation (0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT)."""
    if op in (0, 1) and not logger_exists(name):
        raise LoggerError(f"Logger {name} does not exist!")
    if op == 0:
        if level not in VALID_LOG_LEVELS:
            raise LoggerError(f"Cannot set the log level of {name} to {level} as it is not a supported log level. "
                              f"Valid log levels are {', '.join(VALID_LOG_LEVELS)}")
    elif op == 1:
        if name == ROOT_LOGGER:
            raise LoggerError(f"Removing the log level of the {ROOT_LOGGER} logger is not allowed", invalid_request=True)
    elif op in (2, 3):
        raise LoggerError(f"{'APPEND' if op == 2 else 'SUBTRACT'} operation is not allowed for the BROKER_LOGGER "
                          "resource", invalid_request=True)
    else:
        raise LoggerError(f"Unknown operation type {op} is not allowed for the BROKER_LOGGER resource",
                          invalid_request=True)


log = logging.getLogger(__name__)


def apply(op: int, name: str, level: str | None) -> None:
    """SET (0) or DELETE (1) a validated logger level (Kafka's ``alterLogLevelConfigs``)."""
    logger = _existing(name)
    assert logger is not None
    if op == 0:
        assert level is not None
        log.info("Updating the log level of %s to %s", name, level)
        logger.setLevel(_TO_PYTHON[level])
    else:
        log.info("Unset the log level of %s", name)
        logger.setLevel(logging.NOTSET)
