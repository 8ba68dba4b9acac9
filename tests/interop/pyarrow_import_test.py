"""pyarrow imports batches and streams Alkaid exports (docs/INTEROP.md,
"Handing a batch to pyarrow"), through a tiny helper library loaded with
ctypes: the structs are allocated here, filled by Alkaid, taken by pyarrow.

    python pyarrow_import_test.py <path to libpyarrow_export_helper.so>
"""
import ctypes
import gc
import sys

import pyarrow as pa
import pyarrow.compute as pc

ARROW_ARRAY_SIZE = 80    # sizeof(struct ArrowArray)
ARROW_SCHEMA_SIZE = 72   # sizeof(struct ArrowSchema)
ARROW_STREAM_SIZE = 40   # sizeof(struct ArrowArrayStream)


def address(buf):
    return ctypes.addressof(buf)


def released(buf, release_offset):
    """True once the struct's release callback is NULL (moved or released)."""
    return ctypes.c_void_p.from_buffer(buf, release_offset).value is None


def main():
    helper = ctypes.CDLL(sys.argv[1])
    helper.alkaid_test_export_batch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    helper.alkaid_test_export_stream.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]

    array = ctypes.create_string_buffer(ARROW_ARRAY_SIZE)
    schema = ctypes.create_string_buffer(ARROW_SCHEMA_SIZE)
    assert helper.alkaid_test_export_batch(address(array), address(schema), 10) == 0
    batch = pa.RecordBatch._import_from_c(address(array), address(schema))
    # pyarrow moved the structs out: the shells may go, the batch stays valid.
    assert released(array, 64) and released(schema, 56)
    del array, schema
    gc.collect()
    batch.validate(full=True)
    assert batch.schema == pa.schema([("id", pa.int64()), ("name", pa.utf8())]), batch.schema
    assert batch.column("id").to_pylist() == list(range(10))
    assert batch.column("name").to_pylist() == [None if i % 3 == 0 else f"n{i}" for i in range(10)]
    assert pc.sum(batch.column("id")).as_py() == 45

    stream = ctypes.create_string_buffer(ARROW_STREAM_SIZE)
    assert helper.alkaid_test_export_stream(address(stream), 3, 4) == 0
    reader = pa.RecordBatchReader._import_from_c(address(stream))
    table = reader.read_all()
    assert table.num_rows == 12 and len(table.to_batches()) == 3
    assert table.column("id").to_pylist() == list(range(12))
    del reader
    print("pyarrow", pa.__version__, "imported Alkaid's batch and stream")


if __name__ == "__main__":
    main()
