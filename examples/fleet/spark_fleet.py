"""The fleet queries (queries.py) in Spark, over one or more directories
written by `tally export --to parquet`; local mode (`local[2]`) unless
`--master` names a cluster.

    python3 spark_fleet.py --event Ir --label version --compare a b DIR...
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import queries  # noqa: E402

from pyspark.sql import SparkSession  # noqa: E402


def main():
    master = "local[2]"
    if "--master" in sys.argv:
        i = sys.argv.index("--master")
        master = sys.argv[i + 1]
        del sys.argv[i:i + 2]
    args = queries.arguments(__doc__)
    start = time.monotonic()
    spark = (SparkSession.builder.master(master).appName("tally-fleet")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        for table in ("functions", "profiles"):
            paths = [os.path.join(d, f"{table}.parquet") for d in args.dirs]
            spark.read.parquet(*paths).createOrReplaceTempView(table)
        results = {}
        for name, sql in queries.all_queries(args.event, args.label, args.top,
                                             *(args.compare or (None, None))).items():
            results[name] = [r.asDict() for r in spark.sql(sql).collect()]
        queries.show(results, args.json, time.monotonic() - start)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
