"""A Python consumer: waits for a topic, hands each batch to pyarrow without a
copy, and at the end of the stream lets DuckDB aggregate everything received.

    python examples/python/consumer.py TOPIC [--socket PATH]

Run it with the build tree's module (PYTHONPATH=build/release/python, the
.venv of scripts/install-deps.sh has pyarrow and duckdb) or after
`pip install ./python`."""

from __future__ import annotations

import argparse

import pyarrow as pa

import alkaid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("topic")
    parser.add_argument("--socket", default=None, help="broker socket (default: the client's)")
    args = parser.parse_args()

    received = []
    # Waits for the topic to be created, then gets every batch from the first.
    with alkaid.Consumer(args.topic, wait_for_topic=60, socket=args.socket) as consumer:
        for batch in consumer:  # ends when the producers close
            rb = pa.record_batch(batch)  # zero-copy: the buffers stay in shared memory
            received.append(rb)
            print(f"python consumer: batch of {rb.num_rows} rows, columns {rb.schema.names}")
    batches = pa.Table.from_batches(received)  # noqa: F841 (DuckDB scans it by name)
    try:
        import duckdb
    except ImportError:
        print(f"python consumer: {batches.num_rows} rows in {len(received)} batches")
        return
    # One aggregate per column: count(DISTINCT) works on every type.
    columns = ", ".join(f'count(DISTINCT "{n}")' for n in batches.schema.names)
    row = duckdb.sql(f"SELECT count(*), {columns} FROM batches").fetchone()
    distinct = ", ".join(f"{n}: {v}" for n, v in zip(batches.schema.names, row[1:]))
    print(f"python consumer: DuckDB over the {len(received)} batches: {row[0]} rows; "
          f"distinct values per column: {distinct}")


if __name__ == "__main__":
    main()
