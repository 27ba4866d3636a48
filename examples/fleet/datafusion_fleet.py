"""The fleet queries (queries.py) in DataFusion, over one or more
directories written by `tally export --to parquet`.

    python3 datafusion_fleet.py --event Ir --label version --compare a b DIR...
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import queries  # noqa: E402

from datafusion import SessionContext  # noqa: E402


def main():
    args = queries.arguments(__doc__)
    start = time.monotonic()
    ctx = SessionContext()
    for table in ("functions", "profiles"):
        df = None
        for d in args.dirs:
            one = ctx.read_parquet(os.path.join(d, f"{table}.parquet"))
            df = one if df is None else df.union(one)
        ctx.register_view(table, df)
    results = {}
    for name, sql in queries.all_queries(args.event, args.label, args.top,
                                         *(args.compare or (None, None))).items():
        results[name] = ctx.sql(sql).to_arrow_table().to_pylist()
    queries.show(results, args.json, time.monotonic() - start)


if __name__ == "__main__":
    main()
