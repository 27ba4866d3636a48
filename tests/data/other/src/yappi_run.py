# yappi_run.py - profile pyprog.main() with yappi, save in callgrind format.
# SPDX-License-Identifier: MIT OR Apache-2.0
import os
import sys

import yappi

# relative on purpose: keeps file names in the profile relative
sys.path.insert(0, os.path.relpath(os.path.dirname(os.path.abspath(__file__))))
import pyprog  # noqa: E402

yappi.set_clock_type("cpu")
yappi.start()
pyprog.main()
yappi.stop()
yappi.get_func_stats().save(sys.argv[1], type="callgrind")
