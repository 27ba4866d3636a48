"""The fleet queries, in the SQL that Spark and DataFusion both take.

Tables are those `tally export --to parquet` writes (docs/parquet.md):
`functions` (self and inclusive cost per function and event of each
profile) and `profiles` (totals per profile and event). Every table is
long: one row per event, so each query picks its event with
`event = '...'`, and profiles of different events share one schema.
"""


def top(event, label, n):
    """The top `n` functions by self cost in each group of profiles that
    share a value of the label `label`, with their inclusive cost; summed
    over the group's profiles."""
    return f"""
    SELECT grp, object, file, function, self, inclusive, rank
    FROM (
      SELECT grp, object, file, function, self, inclusive,
             ROW_NUMBER() OVER (PARTITION BY grp
                                ORDER BY self DESC, inclusive DESC, function, file, object) AS rank
      FROM (
        SELECT labels['{label}'] AS grp, object, file, function,
               SUM(self) AS self, SUM(inclusive) AS inclusive
        FROM functions
        WHERE event = '{event}'
        GROUP BY labels['{label}'], object, file, function
      ) g
    ) r
    WHERE rank <= {n}
    ORDER BY grp, rank
    """


def top_inclusive(event, label, n):
    """The same ranked by inclusive cost."""
    return f"""
    SELECT grp, object, file, function, self, inclusive, rank
    FROM (
      SELECT grp, object, file, function, self, inclusive,
             ROW_NUMBER() OVER (PARTITION BY grp
                                ORDER BY inclusive DESC, self DESC, function, file, object) AS rank
      FROM (
        SELECT labels['{label}'] AS grp, object, file, function,
               SUM(self) AS self, SUM(inclusive) AS inclusive
        FROM functions
        WHERE event = '{event}'
        GROUP BY labels['{label}'], object, file, function
      ) g
    ) r
    WHERE rank <= {n}
    ORDER BY grp, rank
    """


def change(event, label, base, new):
    """Each function's self and inclusive cost summed over the profiles
    labelled `label=new`, minus the same over `label=base` (what `tally
    diff` gives for the two merged groups), largest changes first."""
    return f"""
    SELECT object, file, function,
           SUM(CASE WHEN labels['{label}'] = '{new}' THEN self ELSE 0 END)
         - SUM(CASE WHEN labels['{label}'] = '{base}' THEN self ELSE 0 END) AS self_change,
           SUM(CASE WHEN labels['{label}'] = '{new}' THEN inclusive ELSE 0 END)
         - SUM(CASE WHEN labels['{label}'] = '{base}' THEN inclusive ELSE 0 END) AS inclusive_change
    FROM functions
    WHERE event = '{event}' AND labels['{label}'] IN ('{base}', '{new}')
    GROUP BY object, file, function
    HAVING SUM(CASE WHEN labels['{label}'] = '{new}' THEN self ELSE 0 END)
         <> SUM(CASE WHEN labels['{label}'] = '{base}' THEN self ELSE 0 END)
    ORDER BY ABS(self_change) DESC, function, file, object
    """


def merged():
    """Self cost per function and event over every profile: the numbers
    `tally merge` of all the profiles gives."""
    return """
    SELECT event, object, file, function, SUM(self) AS self
    FROM functions
    GROUP BY event, object, file, function
    HAVING SUM(self) <> 0
    ORDER BY event, self DESC, function, file, object
    """


def totals():
    """Totals per event over every profile (the merged profile's)."""
    return """
    SELECT event, SUM(total) AS total, COUNT(DISTINCT profile_id) AS profiles
    FROM profiles
    GROUP BY event
    ORDER BY event
    """


def all_queries(event, label, n, base=None, new=None):
    """The named queries that both engines run."""
    q = {
        "top_self": top(event, label, n),
        "top_inclusive": top_inclusive(event, label, n),
        "merged": merged(),
        "totals": totals(),
    }
    if base is not None and new is not None:
        q["change"] = change(event, label, base, new)
    return q


def arguments(description):
    """The command line both scripts take."""
    import argparse

    p = argparse.ArgumentParser(description=description)
    p.add_argument("dirs", nargs="+", help="directories written by `tally export --to parquet`")
    p.add_argument("--event", default="Ir", help="the event to rank by (default Ir)")
    p.add_argument("--label", default="version", help="the label to group by (default version)")
    p.add_argument("--top", type=int, default=10, help="functions per group (default 10)")
    p.add_argument("--compare", nargs=2, metavar=("BASE", "NEW"),
                   help="two values of the label: the change of each function from BASE to NEW")
    p.add_argument("--json", action="store_true", help="print every result as one JSON object")
    return p.parse_args()


def show(results, as_json, seconds):
    """Prints the results: a JSON object of rows, or tables."""
    import json
    import sys

    if as_json:
        json.dump({"results": results, "seconds": seconds}, sys.stdout)
        print()
        return
    for name, rows in results.items():
        print(f"== {name} ({len(rows)} rows)")
        if not rows:
            continue
        cols = list(rows[0].keys())
        print("\t".join(cols))
        for r in rows[:50]:
            print("\t".join(str(r[c]) for c in cols))
        if len(rows) > 50:
            print(f"... {len(rows) - 50} more")
    print(f"({seconds:.2f} s)", file=sys.stderr)
