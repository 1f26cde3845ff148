# lit configuration: IR tests under test/filecheck, run with the venv's tools on PATH.
import os

import lit.formats

config.name = "presk"
config.test_format = lit.formats.ShTest()
config.suffixes = [".mlir", ".psk"]
config.test_source_root = os.path.join(os.path.dirname(__file__), "test", "filecheck")
config.excludes = ["inputs", "Output"]
venv_bin = os.path.join(os.path.dirname(__file__), ".venv", "bin")
config.environment["PATH"] = os.pathsep.join([venv_bin, os.environ.get("PATH", "")])
config.substitutions.append(("%tutorial", os.path.join(os.path.dirname(__file__), "tutorial")))

# `REQUIRES: avx512f`, `avx2`: tests of what Presk emits on such a host only (erf's vector
# variants, presk/emit/llvm.py: their widths are the host's vectors')
try:
    with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        flags = cpuinfo.read()
    for flag in ("avx512f", "avx2"):
        if f" {flag}" in flags:
            config.available_features.add(flag)
except OSError:
    pass
