"""Run by an installed package's own interpreter (pip_install_test.sh,
wheel_test.sh): alkaid imports from that environment, not the build tree,
its Broker runs the bundled alkaid-broker, and a batch goes through it.
    installed_roundtrip.py WHAT [--no-build-deps]
--no-build-deps: also check that none of the build dependencies is there."""

import importlib.util
import os
import sys

what = sys.argv[1]
if "--no-build-deps" in sys.argv[2:]:
    for build_dep in ("scikit_build_core", "nanobind", "cmake"):
        assert importlib.util.find_spec(build_dep) is None, f"{build_dep} is in the environment"

import alkaid  # noqa: E402
import pyarrow as pa  # noqa: E402

where = os.path.dirname(alkaid.__file__)
assert where.startswith(sys.prefix), f"alkaid imported from {where}, not {sys.prefix}"
print("alkaid from", where)
schema = pa.schema([("x", pa.int64())])
with alkaid.Broker() as broker:
    assert broker.binary.startswith(sys.prefix), broker.binary
    with alkaid.Producer("t", schema, socket=broker.socket) as p, \
            alkaid.Consumer("t", socket=broker.socket) as c:
        p.publish(pa.record_batch([pa.array([1, 2, 3])], schema=schema))
        assert pa.record_batch(c.next(timeout=10)).column(0).to_pylist() == [1, 2, 3]
print(f"round trip through {what}: ok")
