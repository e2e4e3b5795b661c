"""pybroker: a Kafka-compatible broker (asyncio front, Rust storage hot path)."""

__version__ = "0.1.0"
