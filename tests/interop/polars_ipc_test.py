"""polars reads the IPC streams and files Alkaid writes with each codec, for
every gold case it reads from Arrow C++ (docs/INTEROP.md, "polars"): each
case of tests/data/arrow-gold is converted by `alkaid convert` (LZ4, ZSTD;
stream and file), read by polars, and must equal what polars reads from
Arrow C++'s own file of the case. A case polars cannot read from Arrow C++
(a type it lacks) is listed, not counted.

    python polars_ipc_test.py <alkaid tool> <gold directory>
"""
import os
import subprocess
import sys
import tempfile

import polars as pl


def read(path: str, stream: bool) -> pl.DataFrame:
    # A subprocess would isolate a panic; polars raises PanicException,
    # which is an exception like any other here.
    if stream:
        return pl.read_ipc_stream(path)
    return pl.read_ipc(path, memory_map=False)


def main() -> int:
    tool, gold = sys.argv[1], sys.argv[2]
    cases = sorted(f[: -len(".arrow_file")] for f in os.listdir(gold) if f.endswith(".arrow_file"))
    checked, unreadable, failures = 0, [], []
    with tempfile.TemporaryDirectory() as work:
        for case in cases:
            reference_path = os.path.join(gold, case + ".arrow_file")
            try:
                reference = read(reference_path, stream=False)
            except BaseException as e:  # noqa: BLE001 (a panic is a BaseException)
                unreadable.append(f"{case} ({type(e).__name__})")
                continue
            for codec in ("lz4", "zstd"):
                for kind in ("stream", "file"):
                    out = os.path.join(work, f"{case}.{codec}.{kind}")
                    args = [tool, "convert", reference_path, out, "--to", kind,
                            "--compression", codec]
                    if kind == "file":
                        args += ["--magic", "arrow"]
                    subprocess.run(args, check=True)
                    try:
                        got = read(out, stream=kind == "stream")
                    except BaseException as e:  # noqa: BLE001
                        failures.append(f"{case} {codec} {kind}: {type(e).__name__}: {e}")
                        continue
                    if not got.equals(reference, null_equal=True):
                        failures.append(f"{case} {codec} {kind}: values differ")
                    checked += 1
    print(f"{checked} conversions read equal ({len(cases) - len(unreadable)} cases x 2 codecs "
          f"x stream and file); polars {pl.__version__} reads {len(unreadable)} cases from "
          f"Arrow C++ neither: {', '.join(unreadable)}")
    for f in failures:
        print("FAIL", f)
    if checked == 0:
        print("FAIL: no case checked")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
