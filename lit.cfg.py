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
