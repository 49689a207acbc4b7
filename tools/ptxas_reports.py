#!/usr/bin/env python3
"""A CMake compiler launcher that keeps ptxas's report and the SASS of every CUDA file a build compiles.

    CMAKE_CUDA_COMPILER_LAUNCHER="python;tools/ptxas_reports.py;DIR" pip wheel ./plugins/cuda13

runs each ``nvcc ... -c ffi/cuda/NAME.cu -o OBJ ...`` of the build with ``-Xptxas=-v`` appended (a report, no
change to the code generated), passes its output through and writes it to ``DIR/NAME.ptxas``; then copies
each GPU binary (cubin) the object ``OBJ`` embeds to ``DIR/NAME.sm_XX.cubin`` (read from its ``.nv_fatbin``
section: the build runs no second compile). ``python -m benchmarks.gpu_resources --check --reports DIR`` reads
the budget from them, and ``python -m benchmarks.gpu_model --cards --cubins DIR`` the cost cards, instead of
compiling every file again (CI's GPU-budget and GPU-model legs). Commands without a ``.cu`` source run
unchanged. Exits with the compiler's status.
"""

import struct
import subprocess
import sys
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50
ELF_MAGIC = b"\x7fELF"


def embedded_cubins(obj: bytes) -> tuple[dict[int, bytes], list[int]]:
    """``({sm: cubin}, [sm of each compressed image])`` of the GPU binaries in a host ELF64 object's
    ``.nv_fatbin`` section. nvcc compresses large images unless told ``-no-compress`` (the plugin's build
    says it, cmake/cuda-plugin.cmake); a compressed image is listed, not kept: it is no cubin."""
    if obj[:4] != ELF_MAGIC or obj[4] != 2:
        return {}, []
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", obj, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", obj, shoff + i * shentsize) for i in range(shnum)]
    names = sections[shstrndx][4]
    found, compressed = {}, []
    for name, _, _, _, offset, size in sections:
        if obj[names + name:obj.index(b"\0", names + name)] != b".nv_fatbin":
            continue
        data, at = obj[offset:offset + size], 0
        while at + 16 <= len(data) and struct.unpack_from("<I", data, at)[0] == FATBIN_MAGIC:
            header, entries = struct.unpack_from("<HQ", data, at + 6)
            entry, end = at + header, at + header + entries
            while entry < end:
                kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
                sm, = struct.unpack_from("<I", data, entry + 28)
                image = data[entry + entry_header:entry + entry_header + payload]
                if kind == 2:  # an ELF image (1: PTX)
                    if image[:4] == ELF_MAGIC:
                        found[sm] = image
                    else:
                        compressed.append(sm)
                entry += entry_header + payload
            at = end
    return found, compressed


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.exit("usage: ptxas_reports.py DIR COMPILER [ARGS...]")
    out, command = Path(argv[0]), argv[1:]
    sources = [a for a in command[1:] if a.endswith(".cu")]
    if not sources:
        return subprocess.run(command, check=False).returncode
    done = subprocess.run([*command, "-Xptxas=-v"], capture_output=True, text=True, check=False)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(sources[-1]).stem
    (out / f"{stem}.ptxas").write_text(done.stdout + done.stderr)
    objects = [Path(command[i + 1]) for i, a in enumerate(command[:-1]) if a == "-o"]
    if done.returncode == 0 and objects and objects[-1].is_file():
        cubins, compressed = embedded_cubins(objects[-1].read_bytes())
        for sm, cubin in cubins.items():
            (out / f"{stem}.sm_{sm}.cubin").write_bytes(cubin)
        for sm in compressed:  # a report tool never fails a build; the cost cards name what is missing
            print(f"ptxas_reports.py: {objects[-1]}: the sm_{sm} image is compressed, no {stem}.sm_{sm}.cubin "
                  "kept (compile with -no-compress)", file=sys.stderr)
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
