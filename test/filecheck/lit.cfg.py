# Defer to the configuration at the repository's root.
import os
lit_config.load_config(config, os.path.join(os.path.dirname(__file__), "..", "..", "lit.cfg.py"))
