"""The transform process of the consume-transform-produce test (exactly-once with confluent-kafka).

    python -m tests.integration.eos_transform BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID [--hang-after N]

It reads INPUT as a member of GROUP (read_committed, no auto-commit) and, for every poll of up to
100 records, writes each value prefixed with ``T:`` to the same partition of OUTPUT and commits
the consumed offsets in the same transaction (``send_offsets_to_transaction``). It prints
``committed <records>`` after every transaction and runs until it is killed. With
``--hang-after N``, after N transactions it opens one more, produces and sends its offsets, prints
``open``, and hangs there: a kill then leaves a transaction with records and offsets pending.
"""

from __future__ import annotations

import argparse
import time

from confluent_kafka import Consumer, KafkaException, Producer

PREFIX = b"T:"


def main() -> None:
    ap = argparse.ArgumentParser()
    for name in ("bootstrap", "input", "output", "group", "transactional_id"):
        ap.add_argument(name)
    ap.add_argument("--hang-after", type=int, default=-1)
    args = ap.parse_args()
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": args.group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "isolation.level": "read_committed", "session.timeout.ms": 6000,
    })
    producer = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": args.transactional_id})
    producer.init_transactions(60)
    consumer.subscribe([args.input])
    transactions = 0
    while True:
        records = consumer.consume(100, timeout=0.5)
        if not records:
            continue
        producer.begin_transaction()
        for record in records:
            if record.error():
                raise KafkaException(record.error())
            producer.produce(args.output, value=PREFIX + record.value(), key=record.key(), partition=record.partition())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 30)
        if transactions == args.hang_after:
            producer.flush(30)
            print("open", flush=True)
            while True:
                time.sleep(60)
        producer.commit_transaction(30)
        transactions += 1
        print(f"committed {len(records)}", flush=True)


if __name__ == "__main__":
    main()
