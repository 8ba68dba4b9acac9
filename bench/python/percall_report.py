"""Per-iteration instructions from two callgrind profiles of N and 2N
iterations of one loop (bench/python/percall.sh): (2N - N) / N, by shared
object and by function (inclusive)."""

from __future__ import annotations

import re
import subprocess
import sys


def annotate(path: str, inclusive: bool) -> dict[tuple[str, str, str], int]:
    """{(source file, function, object file): instructions} of a profile."""
    out = subprocess.run(["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}",
                          "--threshold=100", "--auto=no", path],
                         capture_output=True, text=True, check=True).stdout
    costs: dict[tuple[str, str, str], int] = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*?):(.*)\[(.*)\]\s*$", line)
        if m:
            key = (m.group(2), m.group(3).strip(), m.group(4))
            costs[key] = costs.get(key, 0) + int(m.group(1).replace(",", ""))
    return costs


def component(source: str, obj: str) -> str:
    name = obj.rsplit("/", 1)[-1]
    if name.startswith("_alkaid"):
        if "nanobind" in source:
            return "nanobind (inside _alkaid.so)"
        if "python/src" in source:
            return "the binding (python/src)"
        return "_alkaid.so: inlined library code (std::, format headers)"
    if name.startswith("libalkaid"):
        return name.split(".so")[0]
    if name.startswith("python3") or name.startswith("libpython"):
        return "the interpreter (python3.11)"
    if "multiarray" in name:
        return "numpy"
    if name.startswith("libarrow") or name.startswith("lib.cpython") or "pyarrow" in obj:
        return "pyarrow / libarrow"
    if name.startswith(("libc.so", "libstdc++", "libm.so", "ld-linux")):
        return name.split(".so")[0]
    return "other: " + name


def per_call(a: dict, b: dict, n: int) -> dict:
    return {k: (b.get(k, 0) - a.get(k, 0)) / n for k in set(a) | set(b)}


def main() -> None:
    first, second, n, what = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    self_cost = per_call(annotate(first, False), annotate(second, False), n)
    groups: dict[str, float] = {}
    for (source, _, obj), v in self_cost.items():
        groups[component(source, obj)] = groups.get(component(source, obj), 0) + v
    print(f"# {what}: instructions per iteration, by component (self cost)")
    for name, v in sorted(groups.items(), key=lambda kv: -kv[1]):
        if abs(v) >= 20:
            print(f"{v:9.0f}  {name}")
    print(f"{sum(groups.values()):9.0f}  total")
    inclusive = per_call(annotate(first, True), annotate(second, True), n)
    print(f"# {what}: largest inclusive costs per iteration (functions below the interpreter's loop)")
    shown = 0
    for (source, fn, obj), v in sorted(inclusive.items(), key=lambda kv: -kv[1]):
        if v < 150 or shown >= 45:
            break
        if fn.startswith(("Py_", "_PyRun", "PyEval_EvalCode", "(below main)", "__libc_start", "0x"))\
                or fn in ("_PyEval_EvalFrameDefault", "Py_BytesMain", "Py_RunMain"):
            continue
        fn = re.sub(r"\(.*", "", fn.replace("(anonymous namespace)::", ""))
        print(f"{v:9.0f}  {fn[:110]}  [{obj.rsplit('/', 1)[-1]}]")
        shown += 1


if __name__ == "__main__":
    main()
