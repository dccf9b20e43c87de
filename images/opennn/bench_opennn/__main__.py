"""python -m bench_opennn --spec SPEC.json --result RESULT.json"""

import sys

from bench_opennn.adapter import main

sys.exit(main())
