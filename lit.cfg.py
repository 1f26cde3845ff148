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

# `REQUIRES: avx512f`: tests of what Presk emits on an AVX-512 host only (erf's vector
# variants, presk/emit/llvm.py)
try:
    with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        if " avx512f" in cpuinfo.read():
            config.available_features.add("avx512f")
except OSError:
    pass
